//! `binding_store`, as written and parsed (docs/operations.md#managed-redis): `memory`, a
//! `redis://` or `rediss://` URL, or the map form (`url`, `mode`, `nodes`, `master_name`,
//! `username`, `password`, `tls`) for Redis Cluster, Sentinel, ACL users and TLS.
//!
//! Checked without connecting, every problem named by key (`--validate-only`): a DB other than
//! 0 in cluster mode, `tls` with a `redis://` URL, a sentinel without `master_name`, a node that
//! is not `HOST:PORT`, an unreadable CA or password file. The `tls` block is the agents' own
//! ([`super::upstream::TlsConfig`], parsed by the same [`super::upstream::tls_settings`]).
//! A password is never displayed: URLs are shown without userinfo, a password given as a URL's
//! userinfo or as a `Secret` stays in [`Password`], whose `Debug` is redacted.

use std::fmt;
use std::path::PathBuf;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use url::Url;

use super::upstream::{tls_settings, TlsConfig};
use super::{err, resolve_reference, ConfigError, ConfigErrors, Problems, Secret};
use crate::a2a::tls::TlsTrust;

/// The key every problem below is named under.
const KEY: &str = "binding_store";

/// `binding_store`, as written: a string (`memory`, a URL) or the map form.
#[derive(Debug, Clone)]
pub enum StoreFileConfig {
    Url(String),
    Map(RedisStoreConfig),
}

impl<'de> Deserialize<'de> for StoreFileConfig {
    /// By hand rather than `untagged`, so a mistake in the map form is named (an unknown
    /// key, a bad `mode`) instead of "did not match any variant".
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = StoreFileConfig;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"memory\", a redis:// or rediss:// URL, or a map")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(StoreFileConfig::Url(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                RedisStoreConfig::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(StoreFileConfig::Map)
            }
        }
        d.deserialize_any(Either)
    }
}

/// The map form, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisStoreConfig {
    /// `redis://` or `rediss://` (TLS), with the DB; optional in cluster and sentinel mode.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub mode: RedisMode,
    /// `HOST:PORT`: the cluster's seed nodes, or the sentinels.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// The master's name the sentinels know (sentinel mode only).
    #[serde(default)]
    pub master_name: Option<String>,
    /// An ACL user.
    #[serde(default)]
    pub username: Option<String>,
    /// By reference: `env:`, `file:` (re-read when it changes) or a literal.
    #[serde(default)]
    pub password: Option<Secret>,
    /// The agents' `tls` block: TLS to Redis (and to the sentinels).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
}

/// How the Redis servers are laid out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisMode {
    #[default]
    Standalone,
    Cluster,
    Sentinel,
}

/// Where threadId -> contextId bindings live, checked (not connected to).
#[derive(Debug, Clone)]
pub enum StoreConfig {
    Memory,
    Redis(Box<RedisSettings>),
}

/// A Redis store, checked.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    pub topology: Topology,
    /// The logical database (always 0 in cluster mode).
    pub db: i64,
    /// `Some`: TLS (`rediss://`, or a `tls` block), with this trust.
    pub tls: Option<TlsTrust>,
    pub username: Option<String>,
    pub password: Option<Password>,
    /// What logs show: the URL without userinfo, or the mode and nodes.
    pub shown: String,
}

/// The servers the store talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    Standalone(Node),
    /// Seed nodes; the rest of the cluster is discovered from them.
    Cluster(Vec<Node>),
    /// The sentinels, and the name of the master they watch.
    Sentinel {
        sentinels: Vec<Node>,
        master_name: String,
    },
}

/// `HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A Redis password: fixed, or a file read again when it changes (rotated passwords,
/// IAM or Entra tokens written by a sidecar, a Secret that Kubernetes updates).
#[derive(Clone)]
pub enum Password {
    Fixed(Secret),
    /// The path, and the value read at start.
    File(PathBuf, Secret),
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed(_) => f.write_str("Fixed([redacted])"),
            Self::File(path, _) => write!(f, "File({}, [redacted])", path.display()),
        }
    }
}

/// `binding_store` as a string: `memory` or a URL.
pub(crate) fn parse_url_form(raw: &str) -> Result<StoreConfig, ConfigErrors> {
    if raw == "memory" {
        return Ok(StoreConfig::Memory);
    }
    let map = RedisStoreConfig {
        url: Some(raw.to_owned()),
        ..Default::default()
    };
    parse_map(&map).map(|r| StoreConfig::Redis(Box::new(r)))
}

/// The map form, every problem named.
pub(crate) fn parse_map(c: &RedisStoreConfig) -> Result<RedisSettings, ConfigErrors> {
    let mut problems = Problems::default();
    let url = c
        .url
        .as_deref()
        .and_then(|raw| problems.take(parse_redis_url(raw)));
    let scheme_tls = url.as_ref().map(|u| u.scheme() == "rediss");
    if c.tls.is_some() && scheme_tls == Some(false) {
        problems.push(err(
            format!("{KEY}.tls"),
            "a tls block needs a rediss:// url (or no url in cluster and sentinel mode)",
        ));
    }
    let tls = match (&c.tls, scheme_tls) {
        (Some(tls), _) => Some(tls_settings(KEY, tls, &mut problems)),
        (None, Some(true)) => Some(TlsTrust::default()),
        (None, _) => None,
    };
    let db = url.as_ref().map_or(0, db_of);
    let nodes: Vec<Node> = c
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, raw)| problems.take(parse_node(&format!("{KEY}.nodes[{i}]"), raw)))
        .collect();
    let url_node = url.as_ref().and_then(|u| {
        Some(Node {
            host: u.host_str()?.trim_matches(['[', ']']).to_owned(),
            port: u.port().unwrap_or(DEFAULT_PORT),
        })
    });
    if c.mode != RedisMode::Sentinel && c.master_name.is_some() {
        problems.push(err(format!("{KEY}.master_name"), "only for mode: sentinel"));
    }
    let topology = match c.mode {
        RedisMode::Standalone => {
            if !c.nodes.is_empty() {
                problems.push(err(
                    format!("{KEY}.nodes"),
                    "only for mode: cluster or sentinel (standalone takes url)",
                ));
            }
            match url_node {
                Some(node) => Some(Topology::Standalone(node)),
                None => {
                    if c.url.is_none() {
                        problems.push(err(format!("{KEY}.url"), "standalone mode needs a url"));
                    }
                    None
                }
            }
        }
        RedisMode::Cluster => {
            if db != 0 {
                problems.push(err(
                    format!("{KEY}.url"),
                    format!("DB {db}: Redis Cluster has only DB 0"),
                ));
            }
            let seeds: Vec<Node> = url_node.into_iter().chain(nodes).collect();
            if seeds.is_empty() && c.url.is_none() && c.nodes.is_empty() {
                problems.push(err(
                    format!("{KEY}.nodes"),
                    "cluster mode needs seed nodes (or a url)",
                ));
            }
            Some(Topology::Cluster(seeds))
        }
        RedisMode::Sentinel => {
            if c.nodes.is_empty() {
                problems.push(err(
                    format!("{KEY}.nodes"),
                    "sentinel mode needs the sentinels' addresses",
                ));
            }
            match c.master_name.as_deref().map(str::trim) {
                Some(name) if !name.is_empty() => Some(Topology::Sentinel {
                    sentinels: nodes,
                    master_name: name.to_owned(),
                }),
                _ => {
                    problems.push(err(
                        format!("{KEY}.master_name"),
                        "sentinel mode needs the master's name",
                    ));
                    None
                }
            }
        }
    };
    let (url_user, url_password) = url.as_ref().map_or((None, None), |u| {
        let user = (!u.username().is_empty()).then(|| percent_decode(u.username()));
        (user, u.password().map(percent_decode))
    });
    if (c.username.is_some() || c.password.is_some())
        && (url_user.is_some() || url_password.is_some())
    {
        problems.push(err(
            format!("{KEY}.url"),
            "give the user and password either in the url or as username/password, not both",
        ));
    }
    let username = c.username.clone().or(url_user);
    let password = match (&c.password, url_password) {
        (Some(secret), _) => problems.take(password(secret)),
        (None, Some(p)) => Some(Password::Fixed(Secret(p))),
        (None, None) => None,
    };
    if username.is_some() && password.is_none() && c.password.is_none() {
        problems.push(err(
            format!("{KEY}.password"),
            "an ACL user needs its password",
        ));
    }
    problems.finish()?;
    let topology = topology.expect("a topology when there is no problem");
    let shown = shown(&topology, url.as_ref(), tls.is_some());
    Ok(RedisSettings {
        topology,
        db,
        tls,
        username,
        password,
        shown,
    })
}

/// Redis's port when a URL or node names none.
const DEFAULT_PORT: u16 = 6379;

/// A `redis://` or `rediss://` URL: a host, an optional numeric DB, nothing else.
fn parse_redis_url(raw: &str) -> Result<Url, ConfigError> {
    let usage = "must be \"memory\", redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]";
    let Ok(url) = Url::parse(raw) else {
        // Not echoed if it might hold a password.
        let raw = if raw.contains('@') { "the value" } else { raw };
        return Err(err(KEY, format!("{raw:?} {usage}")));
    };
    // Shown without userinfo: a Redis password is used, never displayed.
    let shown = crate::redact::url(&url);
    let db = url.path().trim_start_matches('/');
    let plain = matches!(url.scheme(), "redis" | "rediss")
        && url.host_str().is_some_and(|h| !h.is_empty())
        && (db.is_empty() || db.parse::<u32>().is_ok())
        && url.query().is_none()
        && url.fragment().is_none();
    if !plain {
        return Err(err(KEY, format!("{shown:?} {usage}")));
    }
    Ok(url)
}

fn db_of(url: &Url) -> i64 {
    url.path()
        .trim_start_matches('/')
        .parse::<i64>()
        .unwrap_or(0)
}

/// `%XX` escapes of a URL's userinfo, decoded (invalid ones kept as written).
fn percent_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `HOST:PORT` (`[v6]:PORT` for IPv6).
fn parse_node(key: &str, raw: &str) -> Result<Node, ConfigError> {
    let bad = || err(key, format!("{raw:?} must be HOST:PORT"));
    let (host, port) = raw.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 || host.contains(['/', '@', ' ']) {
        return Err(bad());
    }
    Ok(Node {
        host: host.to_owned(),
        port,
    })
}

/// The password reference: a file is read now (a missing one is a problem named now) and
/// watched later; `env:` and literals are fixed.
fn password(secret: &Secret) -> Result<Password, ConfigError> {
    let key = format!("{KEY}.password");
    let value = Secret(resolve_reference(&key, secret.expose())?);
    if value.expose().is_empty() {
        return Err(err(key, "is empty"));
    }
    Ok(match secret.expose().strip_prefix("file:") {
        Some(path) => Password::File(PathBuf::from(path), value),
        None => Password::Fixed(value),
    })
}

fn shown(topology: &Topology, url: Option<&Url>, tls: bool) -> String {
    let scheme = if tls { "rediss" } else { "redis" };
    let list = |nodes: &[Node]| {
        nodes
            .iter()
            .map(Node::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    match topology {
        Topology::Standalone(_) => url.map(crate::redact::url).unwrap_or_default(),
        Topology::Cluster(seeds) => format!("{scheme} cluster {}", list(seeds)),
        Topology::Sentinel {
            sentinels,
            master_name,
        } => format!("{scheme} sentinel {master_name} via {}", list(sentinels)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(yaml: &str) -> Result<RedisSettings, Vec<ConfigError>> {
        let c: RedisStoreConfig = serde_yaml_ng::from_str(yaml).expect("yaml");
        parse_map(&c).map_err(|e| e.0)
    }

    fn keys(errors: &[ConfigError]) -> Vec<&str> {
        errors.iter().map(|e| e.key.as_str()).collect()
    }

    #[test]
    fn the_map_form_reads_each_topology() {
        let s = map("url: rediss://r.internal:6380/2\nusername: gw\npassword: pw").unwrap();
        assert_eq!(
            s.topology,
            Topology::Standalone(Node {
                host: "r.internal".into(),
                port: 6380
            })
        );
        assert_eq!((s.db, s.tls.is_some()), (2, true));
        assert_eq!(s.username.as_deref(), Some("gw"));
        assert_eq!(s.shown, "rediss://r.internal:6380/2");

        let s = map("mode: cluster\nnodes: [a:7000, '[::1]:7001']\ntls: {}").unwrap();
        assert!(matches!(&s.topology, Topology::Cluster(n) if n.len() == 2 && n[1].host == "::1"));
        assert!(s.tls.is_some(), "without url, a tls block means TLS");
        assert_eq!(s.shown, "rediss cluster a:7000,[::1]:7001");

        let s = map("mode: sentinel\nnodes: [s1:26379]\nmaster_name: mymaster").unwrap();
        assert!(
            matches!(&s.topology, Topology::Sentinel { master_name, .. } if master_name == "mymaster")
        );
        assert!(s.tls.is_none());
    }

    #[test]
    fn every_problem_is_named_without_connecting() {
        let e = map("mode: cluster\nurl: redis://a:1/3").unwrap_err();
        assert_eq!(keys(&e), ["binding_store.url"], "{e:?}");
        assert!(e[0].message.contains("only DB 0"));

        let e = map("url: redis://a:1\ntls: {}").unwrap_err();
        assert_eq!(keys(&e), ["binding_store.tls"]);

        let e = map("mode: sentinel\nnodes: [s:1]").unwrap_err();
        assert_eq!(keys(&e), ["binding_store.master_name"]);

        let e = map("url: rediss://a:1\ntls: {ca_file: /nonexistent/ca.pem}").unwrap_err();
        assert_eq!(keys(&e), ["binding_store.tls.ca_file"]);

        // All at once.
        let e = map(
            "mode: sentinel\nnodes: [nope, 'x:0']\nusername: gw\npassword: file:/nonexistent/pw",
        )
        .unwrap_err();
        assert_eq!(
            keys(&e),
            [
                "binding_store.nodes[0]",
                "binding_store.nodes[1]",
                "binding_store.master_name",
                "binding_store.password"
            ],
            "{e:?}"
        );

        let e = map("nodes: [a:1]").unwrap_err();
        assert_eq!(keys(&e), ["binding_store.nodes", "binding_store.url"]);
        let e = map("mode: cluster\nmaster_name: m\nnodes: [a:1]").unwrap_err();
        assert_eq!(keys(&e), ["binding_store.master_name"]);
        let e = map("url: redis://u:p@a:1\npassword: q").unwrap_err();
        assert_eq!(keys(&e), ["binding_store.url"]);
        let e = map("url: redis://a:1\nusername: gw").unwrap_err();
        assert_eq!(keys(&e), ["binding_store.password"]);
    }

    #[test]
    fn a_password_file_is_read_now_and_kept_by_path() {
        let dir = std::env::temp_dir().join(format!("gw-store-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "s3cret\n").unwrap();
        let s = map(&format!(
            "url: redis://a:1\npassword: file:{}",
            file.display()
        ))
        .unwrap();
        match s.password {
            Some(Password::File(path, value)) => {
                assert_eq!(path, file);
                assert_eq!(
                    value.expose(),
                    "s3cret",
                    "trimmed like every file: reference"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(!format!(
            "{:?}",
            map(&format!(
                "url: redis://a:1\npassword: file:{}",
                file.display()
            ))
            .unwrap()
        )
        .contains("s3cret"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn url_userinfo_is_used_and_never_shown() {
        let s = parse_url_form("redis://gw:p%40ss@a:1/0").unwrap();
        let StoreConfig::Redis(s) = s else { panic!() };
        assert_eq!(s.username.as_deref(), Some("gw"));
        assert!(matches!(&s.password, Some(Password::Fixed(p)) if p.expose() == "p@ss"));
        assert_eq!(s.shown, "redis://a:1/0");
        let e = parse_url_form("http://gw:pw@a:1").unwrap_err();
        assert!(!e.0[0].message.contains("pw@"), "{}", e.0[0].message);
    }

    #[test]
    fn the_map_form_names_an_unknown_key() {
        #[derive(Debug, Deserialize)]
        struct File {
            #[allow(dead_code)]
            binding_store: StoreFileConfig,
        }
        let e = serde_yaml_ng::from_str::<File>("binding_store: {url: redis://a:1, mod: cluster}")
            .unwrap_err();
        assert!(e.to_string().contains("unknown field `mod`"), "{e}");
        let e = serde_yaml_ng::from_str::<File>("binding_store: {mode: clustre}").unwrap_err();
        assert!(e.to_string().contains("clustre"), "{e}");
    }
}
