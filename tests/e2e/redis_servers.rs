//! Real Redis servers for the managed-Redis binding store tests (tests/e2e/redis_topologies.rs,
//! issue 26): Debian's `redis-server`, `redis-sentinel` and `redis-cli` on 127.0.0.1 free
//! ports, no persistence, each in a temp directory of its own (its config, its log), killed on
//! drop. A server with TLS (certificates of [`crate::pki`]: a private CA, mTLS, an expired or
//! another name's certificate), ACL users, commands renamed away; a 6-node Redis Cluster
//! (3 masters, 3 replicas) with manual failover and a master killed until its replica is
//! promoted; 1 master + 1 replica behind 3 sentinels, with `SENTINEL FAILOVER`.
//!
//! The harness talks to the servers with `redis-cli` (raw output: no TTY), independent of the
//! `redis` crate the gateway uses, so it sees what a person with `redis-cli` would.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use crate::binary::TempDir;
use crate::pki::CertKey;
use crate::support::free_port;

/// The commands the gateway's ACL user needs on a standalone Redis (a Sentinel's data nodes
/// also need `ROLE`: redis-rs checks the master it was given with it): every binding store call (`GETEX`, `GET` +
/// `EXPIRE` where `GETEX` is missing, `SET`, `DEL`, `HSET`, `HGET`, `HSCAN`, `EXPIRE`), the
/// readiness `PING`, the inbox relay's `PUBLISH` and `SUBSCRIBE` (on a cluster the sharded
/// ones, [`CLUSTER_COMMANDS`]), and what a client sends on connecting (`AUTH`/`HELLO`, which Redis lets
/// through anyway, and `CLIENT SETINFO`, whose answer redis-rs ignores, Redis 7.2+ only:
/// see [`gateway_acl`]).
pub const GATEWAY_COMMANDS: &[&str] = &[
    "getex",
    "get",
    "set",
    "del",
    "hset",
    "hget",
    "hscan",
    "expire",
    "publish",
    "subscribe",
    "ping",
    "auth",
    "hello",
    "client|setinfo",
];
/// What a Redis Cluster adds for a cluster client: the slot map (`CLUSTER SLOTS`, read by
/// redis-rs), `ASKING` (sent on an `-ASK` redirect while a slot migrates), and the inbox
/// relay's sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE`).
pub const CLUSTER_COMMANDS: &[&str] = &["cluster|slots", "asking", "spublish", "ssubscribe"];

/// The name the sentinels of [`RedisSentinel`] monitor.
pub const MASTER_NAME: &str = "mymaster";

/// The ACL rule of user `user` with password `password`: only the gateway's keys and
/// channels (the inbox relay's), only `commands`. A command this server does not know (`CLIENT SETINFO` before
/// Redis 7.2: `ACL SETUSER` refuses it) is left out, see [`RedisNode::knows`].
pub fn acl_rule(user: &str, password: &str, commands: &[&str]) -> String {
    let mut rule = format!(
        "{user} on >{password} ~agui-a2a-gateway:* resetchannels &agui-a2a-gateway:* -@all"
    );
    for c in commands {
        rule.push_str(" +");
        rule.push_str(c);
    }
    rule
}

/// `bin` is on the PATH; else the test fails saying how to install it.
pub fn require_binary(bin: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(bin))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "`{bin}` is not installed: the Redis topology tests need Debian's redis-server, \
             redis-sentinel and redis-tools (`apt-get install redis-server redis-sentinel \
             redis-tools`); `bash scripts/test` installs them"
        )
    })
}

/// How `redis-cli` reaches a TLS server.
#[derive(Debug, Clone)]
pub struct CliTls {
    /// The CA to verify the server with; `None`: `--insecure` (an expired certificate).
    pub ca: Option<PathBuf>,
    /// The client certificate, for a server with `tls-auth-clients yes`.
    pub client: Option<CertKey>,
}

/// A server's TLS: its certificate, the CA it checks clients with, whether it requires them.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert: CertKey,
    /// `tls-ca-cert-file` (Redis requires one even when clients are not checked).
    pub ca: PathBuf,
    /// `tls-auth-clients yes`: a client without a certificate signed by `ca` is refused.
    pub auth_clients: bool,
    /// How the harness's `redis-cli` connects.
    pub cli: CliTls,
}

/// What a `redis-server` starts with, besides port, no persistence and its directory.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// TLS only (`port 0`, `tls-port`).
    pub tls: Option<ServerTls>,
    /// ACL rules (`user ...` lines without `user`), e.g. [`acl_rule`].
    pub users: Vec<String>,
    /// Commands renamed away (`rename-command GETEX ""`): a server without them.
    pub renamed_away: Vec<String>,
    /// A Redis Cluster node (`cluster-enabled yes`, its bus on a free port of its own).
    pub cluster: bool,
    /// `replicaof 127.0.0.1 PORT`.
    pub replica_of: Option<u16>,
}

/// One `redis-server` or `redis-sentinel` of this test.
#[derive(Debug)]
pub struct RedisNode {
    pub port: u16,
    /// Its config (`redis.conf` / `sentinel.conf`) and log (`redis.log`).
    pub dir: TempDir,
    tls: Option<CliTls>,
    child: Option<Child>,
}

/// The first line of a redis-cli answer that is an error reply.
fn is_error_reply(out: &str) -> bool {
    let first = out.lines().next().unwrap_or_default();
    const ERRORS: &[&str] = &[
        "ERR",
        "NOPERM",
        "WRONGPASS",
        "NOAUTH",
        "MOVED",
        "ASK",
        "CLUSTERDOWN",
        "READONLY",
        "LOADING",
        "MASTERDOWN",
        "BUSY",
        "NOGOODSLAVE",
        "INPROG",
        "NOREPLICAS",
        "TRYAGAIN",
        "CROSSSLOT",
        "Error:",
        "Could not connect",
        "AUTH failed",
    ];
    ERRORS.iter().any(|e| {
        first == *e || first.starts_with(&format!("{e} ")) || first.starts_with(&format!("{e}:"))
    })
}

impl RedisNode {
    /// A `redis-server` with `options` on a free port (another one if it was taken).
    pub async fn start(options: &ServerOptions) -> Self {
        require_binary("redis-server");
        require_binary("redis-cli");
        let cli_tls = options.tls.as_ref().map(|t| t.cli.clone());
        for _ in 0..5 {
            let dir = TempDir::new("server");
            let port = free_port();
            let mut conf = vec![
                "bind 127.0.0.1".to_owned(),
                "save \"\"".to_owned(),
                "appendonly no".to_owned(),
                format!("dir {}", dir.path().display()),
                format!("logfile {}", dir.path().join("redis.log").display()),
                // Fast enough for sub-second failovers, not so fast a loaded CI flaps.
                "repl-ping-replica-period 1".to_owned(),
            ];
            match &options.tls {
                None => conf.push(format!("port {port}")),
                Some(tls) => conf.extend([
                    "port 0".to_owned(),
                    format!("tls-port {port}"),
                    format!("tls-cert-file {}", tls.cert.cert.display()),
                    format!("tls-key-file {}", tls.cert.key.display()),
                    format!("tls-ca-cert-file {}", tls.ca.display()),
                    format!(
                        "tls-auth-clients {}",
                        if tls.auth_clients { "yes" } else { "no" }
                    ),
                    // Replication and the cluster bus stay plain: only clients are tested.
                ]),
            }
            for user in &options.users {
                conf.push(format!("user {user}"));
            }
            for cmd in &options.renamed_away {
                conf.push(format!("rename-command {cmd} \"\""));
            }
            if options.cluster {
                conf.extend([
                    "cluster-enabled yes".to_owned(),
                    "cluster-config-file nodes.conf".to_owned(),
                    format!("cluster-port {}", free_port()),
                    // A dead master is noticed in two seconds, its replica elected in ~4 s;
                    // shorter, and a node starved of CPU by the parallel tests is judged
                    // failed while the cluster forms.
                    "cluster-node-timeout 2000".to_owned(),
                    // A replica may always take over (its data is seconds old at most here).
                    "cluster-replica-validity-factor 0".to_owned(),
                ]);
            }
            if let Some(master) = options.replica_of {
                conf.push(format!("replicaof 127.0.0.1 {master}"));
            }
            if let Some(node) =
                Self::spawn("redis-server", "redis.conf", dir, port, conf, &cli_tls).await
            {
                return node;
            }
        }
        panic!("could not start redis-server on a free port (5 tries)");
    }

    /// Starts `binary` on `conf` (written to `conf_name` in `dir`); `None` if the port was
    /// taken meanwhile.
    async fn spawn(
        binary: &str,
        conf_name: &str,
        dir: TempDir,
        port: u16,
        conf: Vec<String>,
        tls: &Option<CliTls>,
    ) -> Option<Self> {
        let conf_path = dir.path().join(conf_name);
        std::fs::write(&conf_path, conf.join("\n") + "\n").unwrap();
        let child = Command::new(binary)
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run {binary} ({e}): `bash scripts/test` installs it")
            });
        let mut node = Self {
            port,
            dir,
            tls: tls.clone(),
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(Ok(Some(status))) = node.child.as_mut().map(Child::try_wait) {
                node.child = None;
                let log = node.log();
                if log.contains("Address already in use") {
                    return None;
                }
                panic!("{binary} exited at start ({status}); its log:\n{log}");
            }
            if node.try_cli(&["PING"]).await.as_deref() == Ok("PONG") {
                return Some(node);
            }
            assert!(
                Instant::now() < deadline,
                "{binary} on port {port} did not answer PING in 10 s; its log:\n{}",
                node.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:PORT/0`, or `rediss://` for a TLS server.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/0", self.port)
    }

    /// Its log (the end of it), for failure messages.
    pub fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        crate::support::tail(&log, 3000).to_owned()
    }

    fn cli_command(&self, user: Option<(&str, &str)>, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("redis-cli");
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if let Some(tls) = &self.tls {
            cmd.arg("--tls");
            match &tls.ca {
                Some(ca) => cmd.arg("--cacert").arg(ca),
                None => cmd.arg("--insecure"),
            };
            if let Some(client) = &tls.client {
                cmd.arg("--cert")
                    .arg(&client.cert)
                    .arg("--key")
                    .arg(&client.key);
            }
        }
        if let Some((user, pass)) = user {
            cmd.args(["--user", user, "--pass", pass, "--no-auth-warning"]);
        }
        cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
        cmd
    }

    async fn run_cli(mut cmd: tokio::process::Command) -> Result<String, String> {
        let out = tokio::time::timeout(Duration::from_secs(10), cmd.output())
            .await
            .map_err(|_| "redis-cli did not answer in 10 s".to_owned())?
            .map_err(|e| format!("cannot run redis-cli ({e}): `bash scripts/test` installs it"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).trim_end().to_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).trim_end().to_owned();
        // redis-cli goes on after a refused AUTH, as the default user: not an answer.
        if stderr.contains("AUTH failed") {
            return Err(stderr);
        }
        if !out.status.success()
            || is_error_reply(&stdout)
            || stdout.is_empty() && !stderr.is_empty()
        {
            return Err(format!("{stdout}{stderr}"));
        }
        Ok(stdout)
    }

    /// One command with `redis-cli` as the default user (or, for a TLS server, with the
    /// harness's TLS settings); its raw answer, or the error reply / failure.
    pub async fn try_cli(&self, args: &[&str]) -> Result<String, String> {
        Self::run_cli(self.cli_command(None, args)).await
    }

    /// Like [`RedisNode::try_cli`] as ACL user `user`.
    pub async fn try_cli_as(
        &self,
        user: &str,
        pass: &str,
        args: &[&str],
    ) -> Result<String, String> {
        Self::run_cli(self.cli_command(Some((user, pass)), args)).await
    }

    /// Like [`RedisNode::try_cli`], failing the test on an error.
    pub async fn cli(&self, args: &[&str]) -> String {
        match self.try_cli(args).await {
            Ok(out) => out,
            Err(e) => panic!(
                "redis-cli -p {} {}: {e}\nthe server's log:\n{}",
                self.port,
                args.join(" "),
                self.log()
            ),
        }
    }

    /// The value of `field` in `INFO section` (`role`, `master_link_status`, ...).
    pub async fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let info = self.try_cli(&["INFO", section]).await.ok()?;
        let prefix = format!("{field}:");
        info.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|v| v.trim().to_owned())
    }

    /// `GET key`.
    pub async fn get(&self, key: &str) -> Option<String> {
        Some(self.cli(&["GET", key]).await).filter(|v| !v.is_empty())
    }

    /// `TTL key` (-2: no key, -1: no expiry).
    pub async fn ttl(&self, key: &str) -> i64 {
        self.cli(&["TTL", key]).await.parse().unwrap()
    }

    /// `true` if this server knows `command` (`client|setinfo`: Redis 7.2+).
    pub async fn knows(&self, command: &str) -> bool {
        matches!(self.try_cli(&["COMMAND", "INFO", command]).await, Ok(out) if !out.trim().is_empty())
    }

    /// The entries of `ACL LOG` (denied commands, keys, channels and failed logins), as the
    /// raw redis-cli lines; empty when nothing was denied.
    pub async fn acl_log(&self) -> String {
        self.cli(&["ACL", "LOG"]).await
    }

    /// Kills the process at once and waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The ACL rule for user `gateway` with `password` and the commands of
/// [`GATEWAY_COMMANDS`] plus `extra`, leaving out what `server` does not know (a rule with
/// an unknown subcommand is refused by Redis 7.0).
pub async fn gateway_acl(server: &RedisNode, password: &str, extra: &[&str]) -> String {
    let mut commands = Vec::new();
    for c in GATEWAY_COMMANDS.iter().chain(extra) {
        if !c.contains('|') || server.knows(c).await {
            commands.push(*c);
        }
    }
    acl_rule("gateway", password, &commands)
}

/// Adds (or resets) user `gateway` on `server` with [`gateway_acl`]'s rule; returns it.
pub async fn add_gateway_user(server: &RedisNode, password: &str, extra: &[&str]) -> String {
    let rule = gateway_acl(server, password, extra).await;
    let mut args = vec!["ACL", "SETUSER"];
    args.extend(rule.split_whitespace());
    assert_eq!(server.cli(&args).await, "OK", "ACL SETUSER {rule}");
    rule
}

/// Waits until `check` gives `Ok`, polling every 50 ms; panics with `what` and the last
/// `Err` after `within`.
pub async fn poll<T>(
    what: &str,
    within: Duration,
    check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    try_poll(what, within, check)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`poll`], giving the failure back instead of panicking.
pub async fn try_poll<T>(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> Result<T, String> {
    let started = Instant::now();
    loop {
        let seen = match check().await {
            Ok(v) => return Ok(v),
            Err(seen) => seen,
        };
        if started.elapsed() >= within {
            return Err(format!(
                "waited {within:?} until {what}, in vain; last seen: {seen}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct ClusterNodeLine {
    pub id: String,
    pub port: u16,
    pub flags: Vec<String>,
    /// The master's id, for a replica.
    pub master: Option<String>,
    pub connected: bool,
    /// Slot ranges `(first, last)` served, for a master.
    pub slots: Vec<(u16, u16)>,
}

impl ClusterNodeLine {
    pub fn is_master(&self) -> bool {
        self.flags.iter().any(|f| f == "master")
    }

    pub fn failing(&self) -> bool {
        self.flags.iter().any(|f| f == "fail" || f == "fail?")
    }
}

fn parse_cluster_nodes(text: &str) -> Vec<ClusterNodeLine> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let addr = f[1].split('@').next().unwrap();
            let port = addr.rsplit(':').next().unwrap().parse().unwrap_or(0);
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .map(|s| match s.split_once('-') {
                    Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                    None => (s.parse().unwrap(), s.parse().unwrap()),
                })
                .collect();
            ClusterNodeLine {
                id: f[0].to_owned(),
                port,
                flags: f[2].split(',').map(str::to_owned).collect(),
                master: Some(f[3].to_owned()).filter(|m| m != "-"),
                connected: f[7] == "connected",
                slots,
            }
        })
        .collect()
}

/// A Redis Cluster of 6 nodes: 3 masters with a replica each, all plain TCP, with ACL `users`
/// if any.
#[derive(Debug)]
pub struct RedisCluster {
    pub nodes: Vec<RedisNode>,
}

impl RedisCluster {
    /// Forms the cluster. On a loaded machine a node can be judged failed while the cluster
    /// forms (the node timeout is short, for the failover tests) and the cluster settle
    /// in a shape the tests do not expect: then it is formed once more, from fresh nodes.
    pub async fn start(users: Vec<String>) -> Self {
        let mut failure = String::new();
        for attempt in 1..=3 {
            match Self::try_start(&users).await {
                Ok(cluster) => return cluster,
                Err(e) => {
                    eprintln!("cluster: attempt {attempt} to form it failed: {e}");
                    failure = e;
                }
            }
        }
        panic!("the cluster did not form in three attempts; the last: {failure}")
    }

    async fn try_start(users: &[String]) -> Result<Self, String> {
        let options = ServerOptions {
            cluster: true,
            users: users.to_vec(),
            ..Default::default()
        };
        let nodes = futures::future::join_all((0..6).map(|_| RedisNode::start(&options))).await;
        let cluster = Self { nodes };
        let mut create = tokio::process::Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for n in &cluster.nodes {
            create.arg(n.addr());
        }
        create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(60), create.output())
            .await
            .map_err(|_| "redis-cli --cluster create did not end in 60 s".to_owned())?
            .expect("run redis-cli --cluster create");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if !(out.status.success() && text.contains("All 16384 slots covered")) {
            return Err(format!("redis-cli --cluster create failed:\n{text}"));
        }
        cluster.healthy_within(Duration::from_secs(30)).await?;
        Ok(cluster)
    }

    /// `HOST:PORT` of every node (the seeds).
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisNode::addr).collect()
    }

    fn index_of_port(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .unwrap_or_else(|| panic!("no node of this cluster on port {port}"))
    }

    /// `CLUSTER NODES` as node `i` sees it.
    pub async fn view(&self, i: usize) -> Result<Vec<ClusterNodeLine>, String> {
        Ok(parse_cluster_nodes(
            &self.nodes[i].try_cli(&["CLUSTER", "NODES"]).await?,
        ))
    }

    fn live(&self) -> impl Iterator<Item = (usize, &RedisNode)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.is_running())
    }

    /// Every live node says `cluster_state:ok`, sees 3 masters covering all slots, each with
    /// a connected replica (none failing), and every replica's link is up.
    pub async fn wait_healthy(&self, within: Duration) {
        if let Err(e) = self.healthy_within(within).await {
            panic!("{e}")
        }
    }

    /// [`Self::wait_healthy`], giving the failure back.
    async fn healthy_within(&self, within: Duration) -> Result<(), String> {
        try_poll("the cluster is healthy", within, async || {
            for (i, node) in self.live() {
                let state = node.info_field_cluster().await;
                if state.as_deref() != Some("ok") {
                    return Err(format!("node {i}: cluster_state {state:?}"));
                }
                let view = self.view(i).await?;
                let live_ports: Vec<u16> = self.live().map(|(_, n)| n.port).collect();
                let masters: Vec<_> = view
                    .iter()
                    .filter(|l| l.is_master() && !l.slots.is_empty())
                    .collect();
                let covered: u32 = masters
                    .iter()
                    .flat_map(|m| &m.slots)
                    .map(|(a, b)| u32::from(b - a) + 1)
                    .sum();
                if masters.len() != 3 || covered != 16384 {
                    return Err(format!(
                        "node {i} sees {} masters, {covered} slots: {view:?}",
                        masters.len()
                    ));
                }
                for m in &masters {
                    if !live_ports.contains(&m.port) || m.failing() {
                        return Err(format!("node {i} still sees {} as a master", m.port));
                    }
                    let replicas = view
                        .iter()
                        .filter(|l| {
                            l.master.as_deref() == Some(&m.id)
                                && l.connected
                                && !l.failing()
                                && live_ports.contains(&l.port)
                        })
                        .count();
                    if replicas == 0 && self.live().count() == 6 {
                        return Err(format!("node {i}: master {} has no replica yet", m.port));
                    }
                }
            }
            for (i, node) in self.live() {
                if node.info_field("replication", "role").await.as_deref() == Some("slave") {
                    let link = node.info_field("replication", "master_link_status").await;
                    if link.as_deref() != Some("up") {
                        return Err(format!("replica {i}: master_link_status {link:?}"));
                    }
                }
            }
            Ok(())
        })
        .await
    }

    /// The index of the node that serves `key` as master now.
    pub async fn master_for(&self, key: &str) -> usize {
        let (_, any) = self.live().next().expect("a live node");
        let slot: u16 = any.cli(&["CLUSTER", "KEYSLOT", key]).await.parse().unwrap();
        let (i, _) = self.live().next().unwrap();
        let view = self.view(i).await.unwrap();
        let master = view
            .iter()
            .find(|l| l.is_master() && l.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
            .unwrap_or_else(|| panic!("no master serves slot {slot}: {view:?}"));
        self.index_of_port(master.port)
    }

    /// The index of a replica of master `master`.
    pub async fn replica_of(&self, master: usize) -> usize {
        let (i, _) = self.live().next().unwrap();
        let view = self.view(i).await.unwrap();
        let id = &view
            .iter()
            .find(|l| l.port == self.nodes[master].port)
            .unwrap()
            .id;
        let replica = view
            .iter()
            .find(|l| l.master.as_deref() == Some(id) && !l.failing())
            .unwrap_or_else(|| panic!("master {master} has no replica: {view:?}"));
        self.index_of_port(replica.port)
    }

    /// Each live master waits until its replica has every write so far (`WAIT 1`).
    pub async fn sync_replicas(&self) {
        for (_, node) in self.live() {
            if node.info_field("replication", "role").await.as_deref() == Some("master") {
                let acked = node.cli(&["WAIT", "1", "5000"]).await;
                assert_eq!(acked, "1", "the replica of {} took the writes", node.port);
            }
        }
    }

    /// `CLUSTER FAILOVER` on replica `replica` (a coordinated switch: its master stops
    /// taking writes until the replica has them all); returns once every live node sees it
    /// as a master and the cluster is healthy.
    pub async fn failover(&self, replica: usize) {
        let ok = self.nodes[replica].cli(&["CLUSTER", "FAILOVER"]).await;
        assert_eq!(ok, "OK");
        self.wait_master_everywhere(replica, Duration::from_secs(20))
            .await;
        self.wait_healthy(Duration::from_secs(20)).await;
    }

    async fn wait_master_everywhere(&self, node: usize, within: Duration) {
        let port = self.nodes[node].port;
        poll(
            &format!("every node sees {port} as a master"),
            within,
            async || {
                for (i, _) in self.live() {
                    let view = self.view(i).await?;
                    let line = view.iter().find(|l| l.port == port).unwrap();
                    if !line.is_master() || line.slots.is_empty() {
                        return Err(format!("node {i} sees {:?} {:?}", line.flags, line.slots));
                    }
                }
                Ok(())
            },
        )
        .await;
    }

    /// Kills master `master` (no handshake) and waits until its replica is promoted: every
    /// live node sees it as master and `cluster_state:ok`. Returns the promoted replica.
    pub async fn kill_master(&mut self, master: usize) -> usize {
        let replica = self.replica_of(master).await;
        self.nodes[master].kill();
        let started = Instant::now();
        self.wait_master_everywhere(replica, Duration::from_secs(30))
            .await;
        self.wait_healthy(Duration::from_secs(30)).await;
        eprintln!(
            "cluster: {} promoted {:?} after its master was killed",
            self.nodes[replica].port,
            started.elapsed()
        );
        replica
    }

    /// `GET key` wherever it lives (`redis-cli -c` follows the redirect).
    pub async fn get(&self, key: &str) -> Option<String> {
        let (_, node) = self.live().next().unwrap();
        let out = node.cli(&["-c", "GET", key]).await;
        Some(out).filter(|v| !v.is_empty())
    }

    pub async fn ttl(&self, key: &str) -> i64 {
        let (_, node) = self.live().next().unwrap();
        node.cli(&["-c", "TTL", key]).await.parse().unwrap()
    }

    /// `ACL LOG` of every live node, those with entries only, as `(port, log)`.
    pub async fn acl_logs(&self) -> Vec<(u16, String)> {
        let mut logs = Vec::new();
        for (_, node) in self.live() {
            let log = node.acl_log().await;
            if !log.trim().is_empty() {
                logs.push((node.port, log));
            }
        }
        logs
    }
}

impl RedisNode {
    async fn info_field_cluster(&self) -> Option<String> {
        let info = self.try_cli(&["CLUSTER", "INFO"]).await.ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix("cluster_state:"))
            .map(|v| v.trim().to_owned())
    }
}

/// A master and a replica behind 3 sentinels (quorum 2) monitoring [`MASTER_NAME`], with
/// short timeouts (a master is down after 1 s).
#[derive(Debug)]
pub struct RedisSentinel {
    /// The data nodes: `data[0]` is the master at start, `data[1]` its replica.
    pub data: Vec<RedisNode>,
    pub sentinels: Vec<RedisNode>,
}

impl RedisSentinel {
    pub async fn start() -> Self {
        require_binary("redis-sentinel");
        let master = RedisNode::start(&ServerOptions::default()).await;
        let replica = RedisNode::start(&ServerOptions {
            replica_of: Some(master.port),
            ..Default::default()
        })
        .await;
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(Self::start_sentinel(master.port).await);
        }
        let setup = Self {
            data: vec![master, replica],
            sentinels,
        };
        // Sentinels find the replica from the master's INFO and each other by hello
        // messages (every 2 s): a failover asked before that fails (NOGOODSLAVE).
        poll(
            "the sentinels know the replica and each other",
            Duration::from_secs(30),
            async || {
                for s in &setup.sentinels {
                    let others = s.try_cli(&["SENTINEL", "SENTINELS", MASTER_NAME]).await?;
                    let n = others.lines().filter(|l| *l == "runid").count();
                    if n != 2 {
                        return Err(format!("sentinel {} knows {n} others", s.port));
                    }
                    let replicas = s.try_cli(&["SENTINEL", "REPLICAS", MASTER_NAME]).await?;
                    let fields = pairs(&replicas);
                    if field(&fields, "flags") != Some("slave")
                        || field(&fields, "master-link-status") != Some("ok")
                    {
                        return Err(format!(
                            "sentinel {} sees the replica as {fields:?}",
                            s.port
                        ));
                    }
                }
                Ok(())
            },
        )
        .await;
        setup
    }

    async fn start_sentinel(master: u16) -> RedisNode {
        for _ in 0..5 {
            let dir = TempDir::new("sentinel");
            let port = free_port();
            let conf = vec![
                format!("port {port}"),
                "bind 127.0.0.1".to_owned(),
                format!("dir {}", dir.path().display()),
                format!("logfile {}", dir.path().join("redis.log").display()),
                format!("sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2"),
                format!("sentinel down-after-milliseconds {MASTER_NAME} 1000"),
                format!("sentinel failover-timeout {MASTER_NAME} 5000"),
                format!("sentinel parallel-syncs {MASTER_NAME} 1"),
            ];
            // The sentinel rewrites its config file: it must be its own and writable.
            if let Some(node) =
                RedisNode::spawn("redis-sentinel", "sentinel.conf", dir, port, conf, &None).await
            {
                return node;
            }
        }
        panic!("could not start redis-sentinel on a free port (5 tries)");
    }

    /// `HOST:PORT` of the sentinels.
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisNode::addr).collect()
    }

    async fn reported_master(&self, sentinel: &RedisNode) -> Result<u16, String> {
        let out = sentinel
            .try_cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])
            .await?;
        out.lines()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("sentinel {} answered {out:?}", sentinel.port))
    }

    /// The index in [`RedisSentinel::data`] of the master every sentinel reports.
    pub async fn master(&self) -> usize {
        let port = poll(
            "the sentinels agree on the master",
            Duration::from_secs(10),
            async || {
                let mut ports = Vec::new();
                for s in &self.sentinels {
                    ports.push(self.reported_master(s).await?);
                }
                ports.dedup();
                match ports[..] {
                    [one] => Ok(one),
                    _ => Err(format!("{ports:?}")),
                }
            },
        )
        .await;
        self.data.iter().position(|n| n.port == port).unwrap()
    }

    /// `SENTINEL FAILOVER mymaster`; returns the new master's index once every sentinel
    /// reports it and it answers `ROLE` master. The old master is not yet a replica then:
    /// see [`RedisSentinel::wait_replica`].
    pub async fn failover(&self) -> usize {
        let old = self.master().await;
        let new = 1 - old;
        let ok = self.sentinels[0]
            .cli(&["SENTINEL", "FAILOVER", MASTER_NAME])
            .await;
        assert_eq!(ok, "OK");
        let started = Instant::now();
        let port = self.data[new].port;
        poll(
            "every sentinel reports the new master",
            Duration::from_secs(30),
            async || {
                for s in &self.sentinels {
                    let p = self.reported_master(s).await?;
                    if p != port {
                        return Err(format!("sentinel {} reports {p}", s.port));
                    }
                }
                match self.data[new].info_field("replication", "role").await {
                    Some(r) if r == "master" => Ok(()),
                    r => Err(format!("{port} role {r:?}")),
                }
            },
        )
        .await;
        eprintln!(
            "sentinel: {port} is master {:?} after SENTINEL FAILOVER",
            started.elapsed()
        );
        new
    }

    /// Waits until data node `i` is a replica with its link up (after a failover, the
    /// sentinels turn the old master into a replica some 10 s later).
    pub async fn wait_replica(&self, i: usize) {
        let node = &self.data[i];
        let started = Instant::now();
        poll(
            &format!("{} is a replica in sync", node.port),
            Duration::from_secs(40),
            async || {
                let role = node.info_field("replication", "role").await;
                let link = node.info_field("replication", "master_link_status").await;
                match (role.as_deref(), link.as_deref()) {
                    (Some("slave"), Some("up")) => Ok(()),
                    seen => Err(format!("{seen:?}")),
                }
            },
        )
        .await;
        eprintln!(
            "sentinel: {} a replica again {:?} later",
            node.port,
            started.elapsed()
        );
    }

    /// `GET key` on the current master.
    pub async fn get(&self, key: &str) -> Option<String> {
        self.data[self.master().await].get(key).await
    }
}

/// The `key\nvalue\n...` lines of a flat redis-cli answer, as pairs.
fn pairs(raw: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = raw.lines().collect();
    lines
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0].to_owned(), c[1].to_owned()))
        .collect()
}

fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}
