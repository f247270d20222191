//! Connections to the Redis the store uses (docs/operations.md#managed-redis): one standalone
//! server, a Redis Cluster, or the master a set of sentinels names; over TLS or not; as an ACL
//! user whose password may be re-read from its file.
//!
//! Built on the `redis` crate: its multiplexed connection (one socket per server, shared by
//! every call), its cluster client (redirections, topology refresh, failover), its TLS
//! (rustls) and its credentials stream (a new password is sent with `AUTH` on every live
//! connection). What is ours, and why:
//! - [`Reconnecting`] instead of the crate's `ConnectionManager`: the manager takes no DNS
//!   resolver, and one is needed to verify `tls.server_name` while connecting to another
//!   address (the name goes to TLS, [`NameResolver`] maps it to the node). It holds one
//!   connection, made on first use (the gateway starts with Redis down), and drops it when a
//!   call finds it broken; the next call connects again.
//! - [`Sentinel`]: the master is asked of the sentinels by name (`SENTINEL
//!   get-master-addr-by-name`, one sentinel after the other), and asked again after a call
//!   fails in a way a failover explains (the connection broke, or the server now answers
//!   `READONLY`), and by every readiness probe; a new address replaces the connection.
//! - [`RotatingPassword`]: the password file is stat'ed every [`REREAD_EVERY`]; a new value
//!   goes to every connection (`AUTH`), and new connections use it.
//! - [`subscribe`]: the live inbox's relay subscribes on a RESP3 connection of its own (the
//!   crate delivers pub/sub messages as pushes only on RESP3), made with the same TLS, user
//!   and password; `SSUBSCRIBE` on a cluster, whose client follows the channel's shard.
//!
//! TLS: the `tls` block is the agents' own, parsed by the same code into the same
//! [`TlsTrust`]; it reaches the `redis` crate as PEM ([`certificates`]). One difference,
//! the crate's: with `ca_file` only those roots are trusted (a private CA), without it the
//! operating system's store. The sentinels are spoken to with the same TLS, without `AUTH`.
//!
//! Every connection attempt and every reply is bounded by the caller's timeout (the
//! connection and response timeouts below, and the store's own bound around each call).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt as _;
use redis::aio::MultiplexedConnection;
use redis::auth::{BasicAuth, StreamingCredentialsProvider};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::io::AsyncDNSResolver;
use redis::{
    AsyncConnectionConfig, Client, ClientTlsConfig, Cmd, ConnectionAddr, ConnectionInfo,
    FromRedisValue, IntoConnectionInfo, RedisConnectionInfo, RedisFuture, RedisResult,
    TlsCertificates, Value,
};
use rustls_pki_types::PrivateKeyDer;
use tokio::sync::Mutex;

use crate::a2a::tls::TlsTrust;
use crate::config::store::Node;
use crate::config::{Password, RedisSettings, Topology};
use crate::upstream::credentials::files::{self, WatchedFile};

/// Whether a command may be sent again on a new connection when the one it went out on
/// broke (the server restarted or failed over, or closed its clients after a password
/// rotation): every command the store sends may, but `SET NX`, which would find its own
/// claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    Once,
    Never,
}

/// How often a password file is checked for a new value.
pub(crate) const REREAD_EVERY: Duration = Duration::from_secs(1);

/// The store's connection, whichever the topology.
pub(crate) enum Connection {
    Standalone(Reconnecting),
    Cluster(
        Mutex<Option<ClusterConnection>>,
        redis::cluster::ClusterClient,
    ),
    Sentinel(Sentinel),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Standalone(_) => "Standalone",
            Self::Cluster(..) => "Cluster",
            Self::Sentinel(_) => "Sentinel",
        })
    }
}

impl Connection {
    /// The connection `settings` describe; nothing is connected yet. `timeout` bounds each
    /// connection attempt and each reply.
    pub(crate) fn new(settings: &RedisSettings, timeout: Duration) -> Result<Self, String> {
        let credentials = Credentials::of(settings);
        Ok(match &settings.topology {
            Topology::Standalone(node) => {
                Self::Standalone(Reconnecting::new(settings, &credentials, node, timeout)?)
            }
            Topology::Cluster(seeds) => {
                let builder = cluster_builder(settings, &credentials, seeds, timeout)?;
                let client = builder.build().map_err(|e| e.to_string())?;
                Self::Cluster(Mutex::new(None), client)
            }
            Topology::Sentinel {
                sentinels,
                master_name,
            } => Self::Sentinel(Sentinel {
                settings: settings.clone(),
                credentials,
                sentinels: sentinels.clone(),
                master_name: master_name.clone(),
                timeout,
                master: Mutex::new(None),
            }),
        })
    }

    /// One command.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd, retry: Retry) -> RedisResult<T> {
        match self {
            Self::Standalone(r) => r.query(cmd, retry).await,
            Self::Cluster(conn, client) => {
                let mut conn = {
                    let mut held = conn.lock().await;
                    match &*held {
                        Some(c) => c.clone(),
                        None => {
                            let c = client.get_async_connection().await?;
                            *held = Some(c.clone());
                            c
                        }
                    }
                };
                cmd.query_async(&mut conn).await
            }
            Self::Sentinel(s) => s.query(cmd, retry).await,
        }
    }

    /// Readiness: `PING`; in sentinel mode the master is asked of the sentinels again first,
    /// so a failover is followed even when no run calls.
    pub(crate) async fn ping(&self) -> RedisResult<()> {
        if let Self::Sentinel(s) = self {
            s.refresh().await?;
        }
        self.query::<Value>(&redis::cmd("PING"), Retry::Once)
            .await
            .map(drop)
    }
}

/// The cluster client of `seeds`: timeouts, retries, TLS, credentials.
fn cluster_builder(
    settings: &RedisSettings,
    credentials: &Credentials,
    seeds: &[Node],
    timeout: Duration,
) -> Result<ClusterClientBuilder, String> {
    let nodes = seeds
        .iter()
        .map(|n| info(settings, credentials, n, false))
        .collect::<Result<Vec<_>, _>>()?;
    let mut builder = ClusterClientBuilder::new(nodes)
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(2)
        .min_retry_wait(50)
        .max_retry_wait(500);
    if let Some(trust) = &settings.tls {
        builder = builder
            .tls(redis::TlsMode::Secure)
            .certs(certificates(trust));
        if let Some(resolver) = NameResolver::for_seeds(trust, seeds) {
            builder = builder.async_dns_resolver(resolver);
        }
    }
    if let Some(provider) = credentials.provider.clone() {
        builder = builder.set_credentials_provider(provider);
    }
    Ok(builder)
}

/// A subscription to one channel (docs/design.md#the-live-inbox): held, it receives; its
/// messages, and a [`redis::PushKind::Disconnection`] when its connection closes, go to the
/// sink it was made with. Dropped, it ends.
// Never read: held, the connection receives; dropping it ends the subscription.
#[allow(dead_code)]
pub(crate) enum Subscription {
    Server(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Server(_) => "Subscription::Server",
            Self::Cluster(_) => "Subscription::Cluster",
        })
    }
}

/// Subscribes to `channel` on the Redis `settings` describe, with the store's TLS, user and
/// (rotating) password, on a RESP3 connection of its own whose pushes go to `sink` (which
/// must not block): `SUBSCRIBE` on a standalone server or the master the sentinels name,
/// `SSUBSCRIBE` (sharded pub/sub) on a cluster. `timeout` bounds connecting and the reply.
pub(crate) async fn subscribe(
    settings: &RedisSettings,
    timeout: Duration,
    channel: &str,
    sink: impl redis::aio::AsyncPushSender,
) -> RedisResult<Subscription> {
    let credentials = Credentials::of(settings);
    let client_error = |e: String| redis::RedisError::from((redis::ErrorKind::Client, "relay", e));
    let node = match &settings.topology {
        Topology::Cluster(seeds) => {
            let client = cluster_builder(settings, &credentials, seeds, timeout)
                .map_err(client_error)?
                .use_protocol(redis::ProtocolVersion::RESP3)
                .push_sender(sink)
                .build()?;
            let mut conn = client.get_async_connection().await?;
            conn.ssubscribe(channel).await?;
            return Ok(Subscription::Cluster(conn));
        }
        Topology::Standalone(node) => node.clone(),
        Topology::Sentinel {
            sentinels,
            master_name,
        } => {
            let sentinel = Sentinel {
                settings: settings.clone(),
                credentials: credentials.clone(),
                sentinels: sentinels.clone(),
                master_name: master_name.clone(),
                timeout,
                master: Mutex::new(None),
            };
            sentinel.ask_sentinels().await?
        }
    };
    let mut info = info(settings, &credentials, &node, false).map_err(client_error)?;
    let resp3 = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    info = info.set_redis_settings(resp3);
    let client = Client::open(info)?;
    let config = server_config(settings, &credentials, &node, timeout).set_push_sender(sink);
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    conn.subscribe(channel).await?;
    Ok(Subscription::Server(conn))
}

/// The connection config of one server: timeouts, the TLS name's resolver, credentials.
fn server_config(
    settings: &RedisSettings,
    credentials: &Credentials,
    node: &Node,
    timeout: Duration,
) -> AsyncConnectionConfig {
    let mut config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    if let Some(resolver) = settings
        .tls
        .as_ref()
        .and_then(|t| NameResolver::for_node(t, node))
    {
        config = config.set_dns_resolver(resolver);
    }
    if let Some(provider) = credentials.provider.clone() {
        config = config.set_credentials_provider(provider);
    }
    config
}

/// The user and password every connection authenticates with.
#[derive(Clone, Default)]
struct Credentials {
    username: Option<String>,
    /// A fixed password (a file's is given by `provider`).
    password: Option<String>,
    provider: Option<RotatingPassword>,
}

impl Credentials {
    fn of(settings: &RedisSettings) -> Self {
        let username = settings.username.clone();
        match &settings.password {
            None => Self {
                username,
                ..Default::default()
            },
            Some(Password::Fixed(secret)) => Self {
                username,
                password: Some(secret.expose().to_owned()),
                provider: None,
            },
            Some(Password::File(path, start)) => Self {
                // Also set, so a connection made before the first read has it.
                password: Some(start.expose().to_owned()),
                provider: Some(RotatingPassword {
                    username: username.clone().unwrap_or_else(|| "default".into()),
                    file: Arc::new(WatchedFile::new(
                        path.clone(),
                        files::verbatim,
                        reqwest::header::HeaderValue::from_str(start.expose()).ok(),
                    )),
                }),
                username,
            },
        }
    }

    fn apply(&self, mut redis: RedisConnectionInfo) -> RedisConnectionInfo {
        if let Some(user) = &self.username {
            redis = redis.set_username(user);
        }
        if let Some(password) = &self.password {
            redis = redis.set_password(password);
        }
        redis
    }
}

/// The connection info of `node`: TLS (to `tls.server_name` when set, which
/// [`NameResolver`] maps back to the node), DB, user and password. `sentinel`: a sentinel's
/// (no DB, no `AUTH`).
fn info(
    settings: &RedisSettings,
    credentials: &Credentials,
    node: &Node,
    sentinel: bool,
) -> Result<ConnectionInfo, String> {
    let addr = match &settings.tls {
        None => ConnectionAddr::Tcp(node.host.clone(), node.port),
        Some(trust) => ConnectionAddr::TcpTls {
            host: trust
                .server_name
                .as_ref()
                .map_or_else(|| node.host.clone(), |n| n.to_str().into_owned()),
            port: node.port,
            insecure: false,
            tls_params: None,
        },
    };
    let mut info = addr.into_connection_info().map_err(|e| e.to_string())?;
    if !sentinel {
        let redis = credentials.apply(info.redis_settings().clone().set_db(settings.db));
        info = info.set_redis_settings(redis);
    }
    match &settings.tls {
        Some(trust) => Client::build_with_tls(info, certificates(trust))
            .map(|c| c.get_connection_info().clone())
            .map_err(|e| format!("tls: {e}")),
        None => Ok(info),
    }
}

/// What the `redis` crate takes for TLS: the extra roots and the client identity, as PEM.
fn certificates(trust: &TlsTrust) -> TlsCertificates {
    let pem = |label: &str, der: &[u8]| {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let mut out = format!("-----BEGIN {label}-----\n");
        for line in body.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).unwrap_or_default());
            out.push('\n');
        }
        out.push_str(&format!("-----END {label}-----\n"));
        out
    };
    let chain = |certs: &[rustls_pki_types::CertificateDer<'_>]| {
        certs
            .iter()
            .map(|c| pem("CERTIFICATE", c))
            .collect::<String>()
            .into_bytes()
    };
    TlsCertificates {
        client_tls: trust.client_identity.as_ref().map(|id| {
            let label = match &*id.key {
                PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
                PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
                _ => "PRIVATE KEY",
            };
            ClientTlsConfig {
                client_cert: chain(&id.chain),
                client_key: pem(label, id.key.secret_der()).into_bytes(),
            }
        }),
        root_cert: (!trust.extra_roots.is_empty()).then(|| chain(&trust.extra_roots)),
    }
}

/// Resolves `tls.server_name` to the node's own host, and every other name as usual.
struct NameResolver {
    name: String,
    host: String,
}

impl NameResolver {
    fn for_node(trust: &TlsTrust, node: &Node) -> Option<Self> {
        let name = trust.server_name.as_ref()?.to_str().into_owned();
        (name != node.host).then(|| Self {
            name,
            host: node.host.clone(),
        })
    }

    /// Cluster seeds: the name resolves to the first seed (the others are found by their
    /// own addresses, as the cluster announces them).
    fn for_seeds(trust: &TlsTrust, seeds: &[Node]) -> Option<Self> {
        Self::for_node(trust, seeds.first()?)
    }
}

impl AsyncDNSResolver for NameResolver {
    fn resolve<'a, 'b: 'a>(
        &'a self,
        host: &'b str,
        port: u16,
    ) -> RedisFuture<'a, Box<dyn Iterator<Item = SocketAddr> + Send + 'a>> {
        let host = if host == self.name { &self.host } else { host };
        let target = format!("{}:{port}", host.trim_matches(['[', ']']));
        Box::pin(async move {
            let found = tokio::net::lookup_host(target).await?;
            Ok(Box::new(found.collect::<Vec<_>>().into_iter())
                as Box<dyn Iterator<Item = SocketAddr> + Send>)
        })
    }
}

/// One server's multiplexed connection, made on first use and again after it broke.
pub(crate) struct Reconnecting {
    client: Client,
    config: AsyncConnectionConfig,
    held: Mutex<Option<MultiplexedConnection>>,
}

impl Reconnecting {
    fn new(
        settings: &RedisSettings,
        credentials: &Credentials,
        node: &Node,
        timeout: Duration,
    ) -> Result<Self, String> {
        let client =
            Client::open(info(settings, credentials, node, false)?).map_err(|e| e.to_string())?;
        let config = server_config(settings, credentials, node, timeout);
        Ok(Self {
            client,
            config,
            held: Mutex::new(None),
        })
    }

    async fn connection(&self) -> RedisResult<MultiplexedConnection> {
        let mut held = self.held.lock().await;
        if let Some(conn) = &*held {
            return Ok(conn.clone());
        }
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        *held = Some(conn.clone());
        Ok(conn)
    }

    /// `cmd` on the held connection; when that one turns out broken it is dropped, and with
    /// [`Retry::Once`] the command goes out again on a new one.
    async fn query<T: FromRedisValue>(&self, cmd: &Cmd, retry: Retry) -> RedisResult<T> {
        let mut conn = self.connection().await?;
        match cmd.query_async(&mut conn).await {
            Err(e) if broken(&e) => {
                self.held.lock().await.take();
                if retry == Retry::Never || e.is_timeout() {
                    return Err(e);
                }
                cmd.query_async(&mut self.connection().await?).await
            }
            answer => answer,
        }
    }
}

/// Whether the connection that gave `e` is of no further use.
fn broken(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_unrecoverable_error()
}

/// Whether `e` says the server is no longer the master (a failover happened).
fn demoted(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
            | redis::ErrorKind::Server(redis::ServerErrorKind::MasterDown)
    )
}

/// The master the sentinels name, followed across failovers.
pub(crate) struct Sentinel {
    settings: RedisSettings,
    credentials: Credentials,
    sentinels: Vec<Node>,
    master_name: String,
    timeout: Duration,
    /// The master's address and its connection.
    master: Mutex<Option<(Node, Arc<Reconnecting>)>>,
}

impl Sentinel {
    /// `cmd` on the master; when its connection broke or it was demoted, the sentinels are
    /// asked again and, with [`Retry::Once`], the command goes to the master they name.
    async fn query<T: FromRedisValue>(&self, cmd: &Cmd, retry: Retry) -> RedisResult<T> {
        let master = self.master().await?;
        match master.query(cmd, Retry::Never).await {
            Err(e) if broken(&e) || demoted(&e) => {
                self.master.lock().await.take();
                if retry == Retry::Never || e.is_timeout() {
                    return Err(e);
                }
                self.refresh().await?.query(cmd, Retry::Once).await
            }
            answer => answer,
        }
    }

    async fn master(&self) -> RedisResult<Arc<Reconnecting>> {
        if let Some((_, conn)) = &*self.master.lock().await {
            return Ok(conn.clone());
        }
        self.refresh().await
    }

    /// Asks the sentinels for the master, and connects to it when it moved.
    async fn refresh(&self) -> RedisResult<Arc<Reconnecting>> {
        let node = self.ask_sentinels().await?;
        let mut held = self.master.lock().await;
        if let Some((known, conn)) = &*held {
            if *known == node {
                return Ok(conn.clone());
            }
            tracing::info!(master = %node, was = %known, "binding store: the sentinels name a new master");
        }
        let conn = Arc::new(
            Reconnecting::new(&self.settings, &self.credentials, &node, self.timeout)
                .map_err(|e| redis::RedisError::from((redis::ErrorKind::Client, "master", e)))?,
        );
        *held = Some((node, conn.clone()));
        Ok(conn)
    }

    /// `SENTINEL get-master-addr-by-name`, of each sentinel in turn until one answers.
    async fn ask_sentinels(&self) -> RedisResult<Node> {
        let mut last = None;
        for sentinel in &self.sentinels {
            match self.ask(sentinel).await {
                Ok(Some(node)) => return Ok(node),
                Ok(None) => {
                    last = Some(redis::RedisError::from((
                        redis::ErrorKind::MasterNameNotFoundBySentinel,
                        "the sentinels do not know the master's name",
                    )))
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::EmptySentinelList, "no sentinel"))
        }))
    }

    async fn ask(&self, sentinel: &Node) -> RedisResult<Option<Node>> {
        let info = info(&self.settings, &Credentials::default(), sentinel, true)
            .map_err(|e| redis::RedisError::from((redis::ErrorKind::Client, "sentinel", e)))?;
        let mut config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        if let Some(resolver) = self
            .settings
            .tls
            .as_ref()
            .and_then(|t| NameResolver::for_node(t, sentinel))
        {
            config = config.set_dns_resolver(resolver);
        }
        let mut conn = Client::open(info)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("get-master-addr-by-name").arg(&self.master_name);
        let addr: Option<(String, u16)> = cmd.query_async(&mut conn).await?;
        Ok(addr.map(|(host, port)| Node { host, port }))
    }
}

/// The password in its file, sent again when the file changes.
#[derive(Clone)]
struct RotatingPassword {
    username: String,
    file: Arc<WatchedFile>,
}

impl RotatingPassword {
    fn current(&self) -> Option<String> {
        let value = self.file.current().ok()?;
        value.to_str().ok().map(str::to_owned)
    }
}

impl StreamingCredentialsProvider for RotatingPassword {
    /// The current value at once, then each new one (the file stat'ed every
    /// [`REREAD_EVERY`]). Ends when the connection that subscribed is dropped.
    fn subscribe(
        &self,
    ) -> std::pin::Pin<Box<dyn futures::Stream<Item = RedisResult<BasicAuth>> + Send + 'static>>
    {
        let (username, file) = (self.username.clone(), self.file.clone());
        let watcher = RotatingPassword {
            username: username.clone(),
            file,
        };
        let first = watcher.current();
        let stream =
            futures::stream::unfold((watcher, first.clone()), |(watcher, sent)| async move {
                loop {
                    tokio::time::sleep(REREAD_EVERY).await;
                    let now = watcher.current();
                    if now.is_some() && now != sent {
                        let auth = BasicAuth::new(watcher.username.clone(), now.clone()?);
                        return Some((Ok(auth), (watcher, now)));
                    }
                }
            });
        let first = first.map(|p| Ok(BasicAuth::new(username, p)));
        Box::pin(futures::stream::iter(first).chain(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::pem::PemObject;

    #[test]
    fn certificates_reach_the_crate_as_the_same_pem() {
        let (ca, cert, key) = crate::a2a::tls::test_pki();
        let trust = TlsTrust {
            extra_roots: vec![ca.clone()],
            client_identity: Some(crate::a2a::tls::ClientIdentity {
                chain: vec![cert.clone()],
                key: Arc::new(key.clone_key()),
            }),
            server_name: None,
        };
        let tls = certificates(&trust);
        let roots: Vec<_> =
            rustls_pki_types::CertificateDer::pem_slice_iter(tls.root_cert.as_deref().unwrap())
                .collect::<Result<_, _>>()
                .unwrap();
        assert_eq!(roots, vec![ca]);
        let client = tls.client_tls.unwrap();
        let chain: Vec<_> = rustls_pki_types::CertificateDer::pem_slice_iter(&client.client_cert)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(chain, vec![cert]);
        let read = PrivateKeyDer::from_pem_slice(&client.client_key).unwrap();
        assert_eq!(read.secret_der(), key.secret_der());
        assert!(
            certificates(&TlsTrust::default()).root_cert.is_none(),
            "the OS store"
        );
    }

    #[tokio::test]
    async fn a_rotated_password_file_is_sent_again() {
        let dir = std::env::temp_dir().join(format!("gw-redis-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pw");
        std::fs::write(&path, "one\n").unwrap();
        let provider = RotatingPassword {
            username: "gw".into(),
            file: Arc::new(WatchedFile::new(path.clone(), files::verbatim, None)),
        };
        let mut stream = provider.subscribe();
        let first = stream.next().await.unwrap().unwrap();
        assert_eq!((first.username(), first.password()), ("gw", "one"));
        std::fs::write(&path, "two\n").unwrap();
        let next = tokio::time::timeout(REREAD_EVERY * 5, stream.next())
            .await
            .expect("sent again within a few rereads")
            .unwrap()
            .unwrap();
        assert_eq!(next.password(), "two");
        let _ = std::fs::remove_dir_all(dir);
    }
}
