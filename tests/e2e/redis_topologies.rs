//! The binding store on managed-Redis setups end to end (issue 26, docs/design.md#4): the
//! `binding_store` map form (`url`, `mode`, `nodes`, `master_name`, `username`, `password`,
//! `tls`) against real servers of tests/e2e/redis_servers.rs — TLS with a private CA, mTLS,
//! a wrong CA, an expired certificate and another name's; an ACL user limited to the
//! gateway's keys and commands, its password rotated; a 6-node Redis Cluster behind two
//! replicas (threads, and the live inbox's changes relayed by sharded pub/sub), a coordinated
//! failover under load and a killed master; Sentinel failover under
//! load; a Redis without `GETEX`; and the gateway binary at `RUST_LOG=trace` never showing
//! the password or the client key.
//!
//! Runs are raw `RunAgentInput` bodies without state (tests/e2e/redis.rs), so only the store
//! carries a thread to its context. `/readyz` is read for its `bindingStore` body, not its
//! status. The `harness_*` tests check the servers alone (a broken Redis install shows there).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::binary::Launch;
use crate::inbox::{approval_reaches, waiting_on, Feed};
use crate::pki::{Pki, OTHER_NAME};
use crate::redis::{finished_in, key, readyz, run};
use crate::redis_servers::*;
use crate::support::{drive, drive_message, tail, upstream, wait_until, Gateway};

/// `binding_ttl_s` of these tests.
const TTL_S: i64 = 120;
/// A run that takes longer than this hung.
const RUN_BOUND: Duration = Duration::from_secs(20);

/// The gateway's config with `binding_store: <store>` (the map form) and agent `ref` on the
/// shared reference upstream, as YAML.
fn yaml(store: Value) -> String {
    yaml_with(store, json!([{"name": "ref", "url": upstream("both")}]))
}

fn yaml_with(store: Value, agents: Value) -> String {
    serde_yaml_ng::to_string(&json!({
        "binding_store": store,
        "binding_ttl_s": TTL_S,
        "agents": agents,
    }))
    .unwrap()
}

fn thread(tag: &str) -> String {
    format!("{tag}-{}", uuid::Uuid::new_v4())
}

/// One run on `thread` without state, within `within`: its context.
async fn turn_within(base: &str, thread: &str, within: Duration) -> String {
    let events = tokio::time::timeout(within, run(base, thread, "echo turn", json!({})))
        .await
        .unwrap_or_else(|_| panic!("a run on {thread} did not end within {within:?}"));
    finished_in(&events)
}

async fn turn(gw: &Gateway, thread: &str) -> String {
    turn_within(&gw.base, thread, RUN_BOUND).await
}

/// `agui_gateway_binding_store_errors_total` by `kind` (`""` for a series without one).
async fn store_errors(base: &str) -> BTreeMap<String, u64> {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("agui_gateway_binding_store_errors_total") else {
            continue;
        };
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => r.split_once('}').unwrap(),
            None if rest.starts_with(' ') => ("", rest),
            None => continue,
        };
        let kind = labels
            .split(',')
            .find_map(|l| l.trim().strip_prefix("kind="))
            .map(|k| k.trim_matches('"').to_owned())
            .unwrap_or_default();
        let n: f64 = value.trim().parse().unwrap();
        *out.entry(kind).or_default() += n as u64;
    }
    out
}

fn total(errors: &BTreeMap<String, u64>) -> u64 {
    errors.values().sum()
}

/// `/readyz`'s `bindingStore` when it names a problem (an `error`).
fn store_problem(body: &Value) -> Option<&Value> {
    body.get("bindingStore")
        .filter(|s| s.get("error").is_some_and(|e| !e.is_null()))
}

/// Waits until `/readyz` names no store problem (whatever its status).
async fn wait_store_ok(base: &str, within: Duration) {
    wait_until("the store is healthy in /readyz", within, async || {
        let (status, body) = readyz(base, "").await;
        match store_problem(&body) {
            None => Ok(()),
            Some(_) => Err(format!("{status} {body}")),
        }
    })
    .await;
}

/// Waits until `/readyz`'s `bindingStore` names `kind` and its text has each of `words`
/// (lowercase); returns it.
async fn wait_store_named(base: &str, kind: &str, words: &[&str], within: Duration) -> Value {
    wait_until(
        &format!("/readyz names the store problem {kind} {words:?}"),
        within,
        async || {
            let (status, body) = readyz(base, "").await;
            match store_problem(&body) {
                Some(p)
                    if p["kind"] == kind
                        && words
                            .iter()
                            .all(|w| p.to_string().to_lowercase().contains(w)) =>
                {
                    Ok(p.clone())
                }
                _ => Err(format!("{status} {body}")),
            }
        },
    )
    .await
}

fn pki_tls(pki: &Pki, cert: &crate::pki::CertKey, auth_clients: bool) -> ServerOptions {
    ServerOptions {
        tls: Some(ServerTls {
            cert: cert.clone(),
            ca: pki.ca.clone(),
            auth_clients,
            cli: CliTls {
                ca: Some(pki.ca.clone()),
                client: auth_clients.then(|| pki.client.clone()),
            },
        }),
        ..Default::default()
    }
}

/// `file:PATH`.
fn file_ref(path: &std::path::Path) -> String {
    format!("file:{}", path.display())
}

/// A thread bound on `gw` continues in its context, and Redis holds the binding for
/// `binding_ttl_s`.
async fn assert_thread_continues(gw: &Gateway, redis: &RedisNode, tag: &str) -> String {
    let t = thread(tag);
    let context = turn(gw, &t).await;
    assert_ne!(context, t);
    assert_eq!(
        turn(gw, &t).await,
        context,
        "the second turn found the binding"
    );
    assert_eq!(redis.get(&key(&t)).await.as_deref(), Some(context.as_str()));
    let ttl = redis.ttl(&key(&t)).await;
    assert!((1..=TTL_S).contains(&ttl), "ttl {ttl}");
    context
}

// ---------------------------------------------------------------------------------------
// TLS

#[tokio::test(flavor = "multi_thread")]
async fn tls_with_a_private_ca_carries_threads() {
    let pki = Pki::create();
    let redis = RedisNode::start(&pki_tls(&pki, &pki.server, false)).await;
    assert!(redis.url().starts_with("rediss://"));
    let gw = Gateway::start(
        &yaml(json!({"url": redis.url(), "mode": "standalone", "tls": {"ca_file": pki.ca}})),
        false,
    )
    .await;
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    assert_thread_continues(&gw, &redis, "tls").await;
    let errors = store_errors(&gw.base).await;
    assert_eq!(total(&errors), 0, "{errors:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn mtls_required_by_redis_is_met_with_the_client_certificate() {
    let pki = Pki::create();
    let redis = RedisNode::start(&pki_tls(&pki, &pki.server, true)).await;
    let gw = Gateway::start(
        &yaml(json!({"url": redis.url(), "tls": {
            "ca_file": pki.ca,
            "client_cert": file_ref(&pki.client.cert),
            "client_key": file_ref(&pki.client.key),
        }})),
        false,
    )
    .await;
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    assert_thread_continues(&gw, &redis, "mtls").await;
    let errors = store_errors(&gw.base).await;
    assert_eq!(total(&errors), 0, "{errors:?}");
}

/// The inbox relay's own connection (`SUBSCRIBE`) goes through the store's setup: TLS with a
/// private CA and an ACL user allowed only the gateway's keys, channels and commands.
#[tokio::test(flavor = "multi_thread")]
async fn the_inbox_relay_subscribes_over_tls_as_the_acl_user() {
    let pki = Pki::create();
    let redis = RedisNode::start(&pki_tls(&pki, &pki.server, false)).await;
    let password = format!("relay-{}", uuid::Uuid::new_v4().simple());
    add_gateway_user(&redis, &password, &[]).await;
    let store = json!({"url": redis.url(), "mode": "standalone", "tls": {"ca_file": pki.ca},
        "username": "gateway", "password": password});
    let (a, b) = two_replicas(&relaying(store)).await;
    let mut feed = Feed::past_snapshot(&b.base).await;
    approval_reaches(&a, &mut feed, &thread("tls-relayed")).await;
    let mut feed = Feed::past_snapshot(&a.base).await;
    approval_reaches(&b, &mut feed, &thread("tls-relayed-back")).await;
    let denied = redis.acl_log().await;
    assert!(
        denied.trim().is_empty(),
        "ACL LOG: the relay needed more: {denied}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_its_client_certificate_the_gateway_is_refused_and_says_so() {
    let pki = Pki::create();
    let redis = RedisNode::start(&pki_tls(&pki, &pki.server, true)).await;
    let gw = Gateway::start(
        &yaml(json!({"url": redis.url(), "tls": {"ca_file": pki.ca}})),
        false,
    )
    .await;
    let problem =
        wait_store_named(&gw.base, "tls", &["certificate"], Duration::from_secs(10)).await;
    eprintln!("no client certificate: {problem}");
    let started = Instant::now();
    turn_within(&gw.base, &thread("no-cert"), Duration::from_secs(5)).await;
    eprintln!("a run without the store took {:?}", started.elapsed());
    assert!(
        store_errors(&gw.base)
            .await
            .get("tls")
            .copied()
            .unwrap_or(0)
            >= 1
    );
}

/// A gateway on a TLS Redis it must not trust: `/readyz` names the TLS problem (`words`),
/// runs still complete, promptly, without the store.
async fn refused_server_is_named(
    pki: &Pki,
    server: &crate::pki::CertKey,
    ca_file: &std::path::Path,
    words: &[&str],
) {
    let mut options = pki_tls(pki, server, false);
    if server.cert == pki.expired.cert {
        // redis-cli refuses it too: the harness skips verification.
        options.tls.as_mut().unwrap().cli.ca = None;
    }
    let redis = RedisNode::start(&options).await;
    let gw = Gateway::start(
        &yaml(json!({"url": redis.url(), "tls": {"ca_file": ca_file}})),
        false,
    )
    .await;
    let problem = wait_store_named(&gw.base, "tls", words, Duration::from_secs(10)).await;
    eprintln!("{words:?}: {problem}");
    assert!(
        !problem.to_string().contains("127.0.0.1"),
        "no address in a public body: {problem}"
    );
    // Not a crash, not a hung run: the store is not needed for a run to succeed.
    let t = thread("untrusted");
    let started = Instant::now();
    let first = turn_within(&gw.base, &t, Duration::from_secs(5)).await;
    let second = turn_within(&gw.base, &t, Duration::from_secs(5)).await;
    assert_ne!(first, second, "no store: each run is a new conversation");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let errors = store_errors(&gw.base).await;
    assert!(errors.get("tls").copied().unwrap_or(0) >= 1, "{errors:?}");
    // Nothing reached Redis.
    assert_eq!(redis.get(&key(&t)).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_ca_is_named_in_readyz_and_runs_go_on() {
    let pki = Pki::create();
    refused_server_is_named(
        &pki,
        &pki.server,
        &pki.unknown_ca_root,
        &["certificate", "unknown"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_server_certificate_is_named_in_readyz_and_runs_go_on() {
    let pki = Pki::create();
    refused_server_is_named(&pki, &pki.expired, &pki.ca, &["certificate", "expired"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_for_another_name_needs_tls_server_name() {
    let pki = Pki::create();
    let redis = RedisNode::start(&pki_tls(&pki, &pki.other_name, false)).await;
    let named = Gateway::start(
        &yaml(json!({"url": redis.url(), "tls": {"ca_file": pki.ca, "server_name": OTHER_NAME}})),
        false,
    )
    .await;
    wait_store_ok(&named.base, Duration::from_secs(10)).await;
    assert_thread_continues(&named, &redis, "server-name").await;
    let unnamed = Gateway::start(
        &yaml(json!({"url": redis.url(), "tls": {"ca_file": pki.ca}})),
        false,
    )
    .await;
    let problem = wait_store_named(
        &unnamed.base,
        "tls",
        &["certificate", "name"],
        Duration::from_secs(10),
    )
    .await;
    eprintln!("another name's certificate: {problem}");
    turn_within(&unnamed.base, &thread("unnamed"), Duration::from_secs(5)).await;
}

// ---------------------------------------------------------------------------------------
// ACL users

#[tokio::test(flavor = "multi_thread")]
async fn an_acl_user_with_only_the_listed_commands_serves_every_store_call() {
    let redis = RedisNode::start(&ServerOptions::default()).await;
    let password = format!("acl-{}", uuid::Uuid::new_v4().simple());
    let rule = add_gateway_user(&redis, &password, &[]).await;
    eprintln!("ACL SETUSER {rule}");
    let store = json!({"url": redis.url(), "mode": "standalone", "username": "gateway",
        "password": password});
    let gw = Gateway::start(
        &yaml_with(
            store,
            json!([{"name": "ref", "url": upstream("both")}, {"name": "old", "url": upstream("0.3")}]),
        ),
        false,
    )
    .await;
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    // Every store call: bind and find (GETEX, SET, HSET, EXPIRE), an interrupt answered
    // (SET NX PX, DEL), a 0.3 agent's thread list and thread (HSCAN, HGET), readiness (PING).
    assert_thread_continues(&gw, &redis, "acl").await;
    let hitl = thread("acl-hitl");
    let steps = drive(
        &gw.agent_url("ref"),
        &hitl,
        json!([{"message": "approve"}, {"resume": {"status": "resolved", "payload": "yes"}}]),
    )
    .await;
    assert_eq!(
        steps[1]["state"]["a2a"]["task"]["state"], "completed",
        "{}",
        steps[1]
    );
    let listed = thread("acl-listed");
    drive_message(&gw.agent_url("old"), &listed, "approve").await;
    let list: Value = reqwest::get(format!("{}/threads", gw.agent_url("old")))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        list["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["threadId"] == listed.as_str()),
        "{list}"
    );
    let one = reqwest::get(format!("{}/threads/{listed}", gw.agent_url("old")))
        .await
        .unwrap();
    assert_eq!(one.status(), 200);
    wait_store_ok(&gw.base, Duration::from_secs(5)).await;

    // Nothing was denied, nothing failed.
    let denied = redis.acl_log().await;
    assert!(
        denied.trim().is_empty(),
        "ACL LOG: the gateway needed more:\n{denied}"
    );
    let errors = store_errors(&gw.base).await;
    assert_eq!(total(&errors), 0, "{errors:?}");
    let keys = redis.cli(&["KEYS", "*"]).await;
    assert!(!keys.trim().is_empty());
    for k in keys.lines() {
        assert!(
            k.starts_with("agui-a2a-gateway:"),
            "a key outside the prefix: {k}"
        );
    }
    // ... and the rule is a real limit.
    let as_gateway = async |args: &[&str]| redis.try_cli_as("gateway", &password, args).await;
    assert!(as_gateway(&["SET", "other:key", "1"])
        .await
        .unwrap_err()
        .starts_with("NOPERM"));
    assert!(as_gateway(&["KEYS", "*"])
        .await
        .unwrap_err()
        .starts_with("NOPERM"));
    assert!(as_gateway(&["FLUSHALL"])
        .await
        .unwrap_err()
        .starts_with("NOPERM"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_password_is_read_from_its_file_without_a_restart() {
    let redis = RedisNode::start(&ServerOptions::default()).await;
    let dir = TempDir::new("rotation");
    let file = dir.path().join("redis-password");
    let (one, two, three) = ("rotated-pw-one", "rotated-pw-two", "rotated-pw-three");
    add_gateway_user(&redis, one, &[]).await;
    // A trailing newline is trimmed, as for every file: reference.
    std::fs::write(&file, format!("{one}\n")).unwrap();
    let gw = Gateway::start(
        &yaml(json!({"url": redis.url(), "username": "gateway", "password": file_ref(&file)})),
        false,
    )
    .await;
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    let t = thread("rotation");
    let context = turn(&gw, &t).await;
    assert_eq!(turn(&gw, &t).await, context);
    let probe = thread("rotation-probe");
    let probe_context = turn(&gw, &probe).await;

    // The operator's rotation: a new password on the server and in the file, the old
    // connections closed.
    redis
        .cli(&["ACL", "SETUSER", "gateway", "resetpass", &format!(">{two}")])
        .await;
    std::fs::write(&file, format!("{two}\n")).unwrap();
    let killed: u32 = redis
        .cli(&["CLIENT", "KILL", "USER", "gateway"])
        .await
        .parse()
        .unwrap();
    assert!(killed >= 1, "the gateway was connected as `gateway`");
    // The store's connection was closed under it: the lookup goes out again on a new
    // connection, authenticated with the file's new password.
    assert_eq!(
        turn(&gw, &probe).await,
        probe_context,
        "the run right after CLIENT KILL continues its thread"
    );
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    assert_eq!(
        turn(&gw, &t).await,
        context,
        "no restart: the thread continues"
    );
    assert_eq!(turn(&gw, &t).await, context);
    let errors = store_errors(&gw.base).await;
    eprintln!("store errors after the rotation: {errors:?}");

    // The server rotates and the file lags: named in /readyz, runs go on; the file follows:
    // the store is back, the thread continues.
    redis
        .cli(&[
            "ACL",
            "SETUSER",
            "gateway",
            "resetpass",
            &format!(">{three}"),
        ])
        .await;
    redis.cli(&["CLIENT", "KILL", "USER", "gateway"]).await;
    let problem = wait_store_named(&gw.base, "auth", &[], Duration::from_secs(10)).await;
    for secret in [one, two, three] {
        assert!(!problem.to_string().contains(secret), "{problem}");
    }
    turn_within(&gw.base, &thread("lagging"), Duration::from_secs(5)).await;
    assert!(
        store_errors(&gw.base)
            .await
            .get("auth")
            .copied()
            .unwrap_or(0)
            >= 1
    );
    std::fs::write(&file, three).unwrap();
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    assert_eq!(turn(&gw, &t).await, context);
}

// ---------------------------------------------------------------------------------------
// A Redis without GETEX (6.0, or the command renamed away)

#[tokio::test(flavor = "multi_thread")]
async fn without_getex_the_fallback_keeps_expiry() {
    let redis = RedisNode::start(&ServerOptions {
        renamed_away: vec!["GETEX".into()],
        ..Default::default()
    })
    .await;
    let gw = Gateway::start(&yaml(json!({"url": redis.url()})), false).await;
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    let t = thread("no-getex");
    let context = turn(&gw, &t).await;
    assert_eq!(turn(&gw, &t).await, context);
    let ttl = redis.ttl(&key(&t)).await;
    assert!((1..=TTL_S).contains(&ttl), "ttl {ttl}");
    // A read renews it.
    redis.cli(&["EXPIRE", &key(&t), "30"]).await;
    assert_eq!(turn(&gw, &t).await, context);
    let ttl = redis.ttl(&key(&t)).await;
    assert!(
        (31..=TTL_S).contains(&ttl),
        "renewed by the read: ttl {ttl}"
    );
    let errors = store_errors(&gw.base).await;
    eprintln!("store errors without GETEX: {errors:?}");
}

// ---------------------------------------------------------------------------------------
// Redis Cluster

/// Two gateways (replicas) with `config`, both with the store ready.
async fn two_replicas(config: &str) -> (Gateway, Gateway) {
    let (a, b) = (
        Gateway::start(config, false).await,
        Gateway::start(config, false).await,
    );
    wait_store_ok(&a.base, Duration::from_secs(10)).await;
    wait_store_ok(&b.base, Duration::from_secs(10)).await;
    (a, b)
}

/// The config of `store` with the inbox's shared poll out of the way: what reaches another
/// replica's feed is relayed.
fn relaying(store: Value) -> String {
    format!("{}inbox:\n  poll_s: 3600\n", yaml(store))
}

fn cluster_store(cluster: &RedisCluster) -> Value {
    json!({"mode": "cluster", "nodes": cluster.seeds()})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_behind_two_replicas_carries_threads_and_inbox_changes_across_them() {
    let cluster = RedisCluster::start(vec![]).await;
    let password = format!("cluster-{}", uuid::Uuid::new_v4().simple());
    for node in &cluster.nodes {
        add_gateway_user(node, &password, CLUSTER_COMMANDS).await;
    }
    // Two seeds only: the rest of the cluster is found from them.
    let store = json!({"mode": "cluster", "nodes": cluster.seeds()[..2],
        "username": "gateway", "password": password});
    let (a, b) = two_replicas(&relaying(store)).await;
    // The live inbox's relay (SPUBLISH / SSUBSCRIBE): a run on one replica whose task waits
    // for a human, on the other replica's change feed within a second.
    let mut feed = Feed::past_snapshot(&b.base).await;
    approval_reaches(&a, &mut feed, &thread("cluster-relayed")).await;
    let mut masters = std::collections::HashSet::new();
    for i in 0..10 {
        let t = thread(&format!("cluster-{i}"));
        let context = turn(&a, &t).await;
        assert_eq!(turn(&b, &t).await, context, "turn 2 on the other replica");
        assert_eq!(turn(&a, &t).await, context, "turn 3");
        assert_eq!(
            cluster.get(&key(&t)).await.as_deref(),
            Some(context.as_str())
        );
        let ttl = cluster.ttl(&key(&t)).await;
        assert!((1..=TTL_S).contains(&ttl), "ttl {ttl}");
        masters.insert(cluster.master_for(&key(&t)).await);
    }
    assert!(
        masters.len() >= 2,
        "the threads' keys spread over the masters"
    );
    for gw in [&a, &b] {
        let errors = store_errors(&gw.base).await;
        assert_eq!(total(&errors), 0, "{errors:?}");
    }
    let denied = cluster.acl_logs().await;
    assert!(
        denied.is_empty(),
        "ACL LOG: the gateway needed more: {denied:?}"
    );
}

/// A run of the load: its thread, its context, when it ended.
type Ran = (String, String, Instant);
/// The load's workers: what each ran, and its longest run.
type Load = Vec<tokio::task::JoinHandle<(Vec<Ran>, Duration)>>;

/// A load on `gw` until `stop`: new threads, one run each; `(thread, context, ended)` of
/// each run, and the longest run.
fn start_load(gw: &Gateway, workers: usize, stop: &Arc<AtomicBool>) -> Load {
    (0..workers)
        .map(|w| {
            let (base, stop) = (gw.base.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut done, mut longest) = (Vec::new(), Duration::ZERO);
                while !stop.load(Ordering::Relaxed) {
                    let t = thread(&format!("load-{w}"));
                    let started = Instant::now();
                    let context = turn_within(&base, &t, RUN_BOUND).await;
                    longest = longest.max(started.elapsed());
                    done.push((t, context, Instant::now()));
                }
                (done, longest)
            })
        })
        .collect()
}

async fn end_load(load: Load) -> (Vec<Ran>, Duration) {
    let (mut all, mut longest) = (Vec::new(), Duration::ZERO);
    for worker in load {
        let (done, l) = worker.await.expect("every run of the load ended");
        all.extend(done);
        longest = longest.max(l);
    }
    (all, longest)
}

/// Binds `n` threads on `gw`: `(thread, context)`.
async fn bind_threads(gw: &Gateway, tag: &str, n: usize) -> Vec<(String, String)> {
    let mut bound = Vec::new();
    for i in 0..n {
        let t = thread(&format!("{tag}-{i}"));
        let context = turn(gw, &t).await;
        bound.push((t, context));
    }
    bound
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_failover_under_load_loses_no_acknowledged_binding() {
    let cluster = RedisCluster::start(vec![]).await;
    let gw = Gateway::start(&yaml(cluster_store(&cluster)), false).await;
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    let before = bind_threads(&gw, "before", 12).await;
    for (t, c) in &before {
        assert_eq!(cluster.get(&key(t)).await.as_deref(), Some(c.as_str()));
    }
    let master = cluster.master_for(&key(&before[0].0)).await;
    let replica = cluster.replica_of(master).await;

    let stop = Arc::new(AtomicBool::new(false));
    let load = start_load(&gw, 4, &stop);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let switch = Instant::now();
    cluster.failover(replica).await;
    eprintln!("cluster: CLUSTER FAILOVER done in {:?}", switch.elapsed());
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    let (loaded, longest) = end_load(load).await;
    assert!(longest < Duration::from_secs(5), "a run waited {longest:?}");
    let acknowledged: Vec<_> = loaded
        .iter()
        .filter(|(_, _, ended)| *ended < switch)
        .collect();
    eprintln!(
        "cluster failover: {} runs under load, {} before the switch, longest {longest:?}, \
         store errors {:?}",
        loaded.len(),
        acknowledged.len(),
        store_errors(&gw.base).await
    );
    assert!(!acknowledged.is_empty(), "the load ran before the switch");
    for (t, c) in before
        .iter()
        .map(|(t, c)| (t, c))
        .chain(acknowledged.iter().map(|(t, c, _)| (t, c)))
    {
        assert_eq!(&turn(&gw, t).await, c, "{t} after the failover");
    }
}

/// Waits until `gw` binds and finds a new thread whose key lives on cluster node `node`:
/// the gateway knows the cluster's new shape.
async fn wait_gateway_uses(gw: &Gateway, cluster: &RedisCluster, node: usize) {
    wait_until(
        "the gateway binds on the promoted master",
        Duration::from_secs(20),
        async || {
            let t = loop {
                let t = thread("probe");
                if cluster.master_for(&key(&t)).await == node {
                    break t;
                }
            };
            let first = turn(gw, &t).await;
            match turn(gw, &t).await {
                second if second == first => Ok(()),
                _ => Err(format!("{t}: the binding was not found")),
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_cluster_master_is_replaced_and_threads_continue() {
    let mut cluster = RedisCluster::start(vec![]).await;
    let gw = Gateway::start(&yaml(cluster_store(&cluster)), false).await;
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    let before = bind_threads(&gw, "before", 12).await;
    // Replication is asynchronous: what the replicas hold is what survives a crash.
    cluster.sync_replicas().await;
    let victim = cluster.master_for(&key(&before[0].0)).await;

    let stop = Arc::new(AtomicBool::new(false));
    let load = start_load(&gw, 3, &stop);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let promoted = cluster.kill_master(victim).await;
    stop.store(true, Ordering::Relaxed);
    let (loaded, longest) = end_load(load).await;
    eprintln!(
        "killed master: {} runs during the promotion, longest {longest:?}, store errors {:?}",
        loaded.len(),
        store_errors(&gw.base).await
    );
    // Runs during the outage went on without the store, each within its bound.
    assert!(longest < Duration::from_secs(5), "a run waited {longest:?}");
    wait_gateway_uses(&gw, &cluster, promoted).await;
    for (t, c) in &before {
        assert_eq!(&turn(&gw, t).await, c, "{t} after the promotion");
    }
}

// ---------------------------------------------------------------------------------------
// Sentinel

/// The inbox relay in sentinel mode: changes reach the other replica through the master the
/// sentinels name, and still do after a failover, once the old master is a replica.
#[tokio::test(flavor = "multi_thread")]
async fn the_inbox_relay_follows_the_master_through_a_sentinel_failover() {
    let setup = RedisSentinel::start().await;
    let store = json!({"mode": "sentinel", "nodes": setup.sentinel_addrs(),
        "master_name": MASTER_NAME});
    let (a, b) = two_replicas(&relaying(store)).await;
    let mut feed = Feed::past_snapshot(&b.base).await;
    approval_reaches(&a, &mut feed, &thread("sentinel-relayed")).await;
    let old = setup.master().await;
    setup.failover().await;
    setup.wait_replica(old).await;
    // A change may be lost while the relay subscribes again (the next read of the task
    // brings it back): each try is a new approval, seen within a few seconds.
    let mut tries = 0;
    wait_until(
        "a change relayed after the failover",
        Duration::from_secs(30),
        async || {
            tries += 1;
            let waiting = thread(&format!("sentinel-after-{tries}"));
            drive_message(&a.agent_url("ref"), &waiting, "approve").await;
            let seen = feed
                .find(Duration::from_secs(3), waiting_on(&waiting))
                .await;
            seen.map(drop).ok_or(format!("{waiting} not relayed"))
        },
    )
    .await;
    eprintln!("sentinel relay: relayed again after the failover on try {tries}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sentinel_failover_under_load_keeps_the_bindings() {
    let setup = RedisSentinel::start().await;
    let gw = Gateway::start(
        &yaml(json!({"mode": "sentinel", "nodes": setup.sentinel_addrs(),
            "master_name": MASTER_NAME})),
        false,
    )
    .await;
    wait_store_ok(&gw.base, Duration::from_secs(10)).await;
    let before = bind_threads(&gw, "before", 8).await;
    let old = setup.master().await;
    for (t, c) in &before {
        assert_eq!(
            setup.data[old].get(&key(t)).await.as_deref(),
            Some(c.as_str())
        );
    }
    // SENTINEL FAILOVER does not wait for the replica: what it holds is what survives.
    assert_eq!(setup.data[old].cli(&["WAIT", "1", "5000"]).await, "1");

    let stop = Arc::new(AtomicBool::new(false));
    let load = start_load(&gw, 3, &stop);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let new = setup.failover().await;
    // Until the sentinels turn the old master into a replica (some 10 s), it still takes
    // writes; runs go on all along.
    setup.wait_replica(old).await;
    stop.store(true, Ordering::Relaxed);
    let (loaded, longest) = end_load(load).await;
    eprintln!(
        "sentinel failover: {} runs under load, longest {longest:?}, store errors {:?}",
        loaded.len(),
        store_errors(&gw.base).await
    );
    assert!(longest < Duration::from_secs(5), "a run waited {longest:?}");

    // The gateway writes to the new master now ...
    wait_until(
        "the gateway binds on the new master",
        Duration::from_secs(20),
        async || {
            let t = thread("after");
            let c = turn(&gw, &t).await;
            let stored = setup.data[new].get(&key(&t)).await;
            match (turn(&gw, &t).await, stored) {
                (again, Some(s)) if again == c && s == c => Ok(()),
                seen => Err(format!("{t} -> {c}: {seen:?}")),
            }
        },
    )
    .await;
    // ... and finds what was bound before the switch.
    for (t, c) in &before {
        assert_eq!(&turn(&gw, t).await, c, "{t} after the failover");
    }
    // Bindings the load wrote to the old master after the switch were dropped with its
    // data when it became a replica (Redis, not the gateway): counted, not asserted.
    let mut kept = 0;
    for (t, c, _) in &loaded {
        kept += usize::from(setup.data[new].get(&key(t)).await.as_deref() == Some(c.as_str()));
    }
    eprintln!(
        "sentinel failover: {kept} of {} load bindings kept",
        loaded.len()
    );
}

// ---------------------------------------------------------------------------------------
// Secrets: the gateway binary at RUST_LOG=trace

#[tokio::test(flavor = "multi_thread")]
async fn no_redis_password_or_client_key_shows_in_logs_or_answers() {
    let pki = Pki::create();
    let redis = RedisNode::start(&pki_tls(&pki, &pki.server, true)).await;
    let token = format!("redis-token-{}", uuid::Uuid::new_v4().simple());
    let rotated = format!("redis-token-{}", uuid::Uuid::new_v4().simple());
    add_gateway_user(&redis, &token, &[]).await;
    let dir = TempDir::new("redis-secrets");
    let password_file = dir.path().join("redis-token");
    std::fs::write(&password_file, &token).unwrap();
    let yaml = yaml(json!({
        "url": redis.url(),
        "mode": "standalone",
        "username": "gateway",
        "password": file_ref(&password_file),
        "tls": {"ca_file": pki.ca, "client_cert": file_ref(&pki.client.cert),
            "client_key": file_ref(&pki.client.key)},
    }));
    let gw = Launch {
        config: &yaml,
        log: "trace",
        ..Launch::default()
    }
    .start("redis-secrets-gateway")
    .await;
    wait_store_ok(&gw.base, Duration::from_secs(15)).await;
    let mut answers = Vec::new();
    let t = thread("secrets");
    let mut contexts = Vec::new();
    for text in ["echo one", "echo two"] {
        let events = run(&gw.base, &t, text, json!({})).await;
        contexts.push(finished_in(&events));
        answers.push(serde_json::to_string(&events).unwrap());
    }
    assert_eq!(
        contexts[0], contexts[1],
        "the store works through the binary"
    );

    // An auth failure (the server rotated first) and its recovery, both logged.
    redis
        .cli(&[
            "ACL",
            "SETUSER",
            "gateway",
            "resetpass",
            &format!(">{rotated}"),
        ])
        .await;
    redis.cli(&["CLIENT", "KILL", "USER", "gateway"]).await;
    let problem = wait_store_named(&gw.base, "auth", &[], Duration::from_secs(15)).await;
    answers.push(problem.to_string());
    let events = run(&gw.base, &thread("secrets-down"), "echo down", json!({})).await;
    answers.push(serde_json::to_string(&events).unwrap());
    std::fs::write(&password_file, format!("{rotated}\n")).unwrap();
    wait_store_ok(&gw.base, Duration::from_secs(15)).await;
    let events = run(&gw.base, &t, "echo three", json!({})).await;
    assert_eq!(finished_in(&events), contexts[0]);
    answers.push(serde_json::to_string(&events).unwrap());
    for path in ["/readyz", "/agents", "/agents/ref", "/metrics"] {
        let text = reqwest::get(format!("{}{path}", gw.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        answers.push(text);
    }

    // The secrets: both passwords, and the client key's PEM body (each base64 line, and
    // the whole of it).
    let key_pem = std::fs::read_to_string(&pki.client.key).unwrap();
    let body_lines: Vec<&str> = key_pem
        .lines()
        .filter(|l| !l.starts_with("-----") && !l.trim().is_empty())
        .collect();
    let mut secrets = vec![token.clone(), rotated.clone(), body_lines.concat()];
    secrets.extend(
        body_lines
            .iter()
            .filter(|l| l.len() >= 16)
            .map(|l| (*l).to_owned()),
    );
    let log = gw.log();
    assert!(log.contains(r#""level":"DEBUG""#), "{}", tail(&log, 2000));
    assert!(
        log.contains(&t),
        "the runs are in the log: {}",
        tail(&log, 2000)
    );
    for secret in &secrets {
        for (what, text) in answers
            .iter()
            .map(|a| ("an answer", a))
            .chain([("the log", &log)])
        {
            assert!(
                !text.contains(secret.as_str()),
                "{what} shows a secret: {}...",
                &secret[..8.min(secret.len())]
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The harness alone (no gateway): a broken Redis install fails here, clearly.

#[tokio::test(flavor = "multi_thread")]
async fn harness_tls_servers_take_redis_cli_with_their_ca() {
    let pki = Pki::create();
    let tls = RedisNode::start(&pki_tls(&pki, &pki.server, false)).await;
    assert_eq!(tls.cli(&["PING"]).await, "PONG");
    // Plain TCP on the TLS port, and a client trusting another CA, are refused.
    let plain = tokio::process::Command::new("redis-cli")
        .args(["-p", &tls.port.to_string(), "PING"])
        .output()
        .await
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&plain.stdout).trim(), "PONG");
    let wrong_ca = tokio::process::Command::new("redis-cli")
        .args(["-p", &tls.port.to_string(), "--tls", "--cacert"])
        .arg(&pki.unknown_ca_root)
        .arg("PING")
        .output()
        .await
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&wrong_ca.stdout).trim(), "PONG");

    let mtls = RedisNode::start(&pki_tls(&pki, &pki.server, true)).await;
    assert_eq!(mtls.cli(&["PING"]).await, "PONG");
    let no_cert = tokio::process::Command::new("redis-cli")
        .args(["-p", &mtls.port.to_string(), "--tls", "--cacert"])
        .arg(&pki.ca)
        .arg("PING")
        .output()
        .await
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&no_cert.stdout).trim(), "PONG");

    // Redis serves an expired certificate (its clients must notice); redis-cli does.
    let mut options = pki_tls(&pki, &pki.expired, false);
    options.tls.as_mut().unwrap().cli.ca = None;
    let expired = RedisNode::start(&options).await;
    assert_eq!(expired.cli(&["PING"]).await, "PONG");
    let verified = tokio::process::Command::new("redis-cli")
        .args(["-p", &expired.port.to_string(), "--tls", "--cacert"])
        .arg(&pki.ca)
        .arg("PING")
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&verified.stdout).into_owned()
        + &String::from_utf8_lossy(&verified.stderr);
    // (OpenSSL's reason, "certificate has expired", is not in redis-cli's message.)
    assert!(said.contains("certificate verify failed"), "{said}");

    let other = RedisNode::start(&pki_tls(&pki, &pki.other_name, false)).await;
    // redis-cli checks the chain, not the name.
    assert_eq!(other.cli(&["PING"]).await, "PONG");
}

#[tokio::test(flavor = "multi_thread")]
async fn harness_acl_user_and_renamed_command() {
    let redis = RedisNode::start(&ServerOptions::default()).await;
    let rule = add_gateway_user(&redis, "pw", &[]).await;
    let knows_setinfo = redis.knows("client|setinfo").await;
    assert_eq!(rule.contains("client|setinfo"), knows_setinfo, "{rule}");
    let as_gw = async |args: &[&str]| redis.try_cli_as("gateway", "pw", args).await;
    assert_eq!(
        as_gw(&["SET", "agui-a2a-gateway:x", "1"]).await.unwrap(),
        "OK"
    );
    assert_eq!(
        as_gw(&["GETEX", "agui-a2a-gateway:x", "EX", "10"])
            .await
            .unwrap(),
        "1"
    );
    assert!(as_gw(&["GET", "other"])
        .await
        .unwrap_err()
        .starts_with("NOPERM"));
    assert!(as_gw(&["FLUSHALL"])
        .await
        .unwrap_err()
        .starts_with("NOPERM"));
    assert!(as_gw(&["SUBSCRIBE", "agui-a2a-gateway:c"]).await.is_err());
    let log = redis.acl_log().await;
    assert!(log.contains("NOPERM") || log.contains("reason"), "{log}");
    assert!(redis
        .try_cli_as("gateway", "wrong", &["PING"])
        .await
        .is_err());

    let renamed = RedisNode::start(&ServerOptions {
        renamed_away: vec!["GETEX".into()],
        ..Default::default()
    })
    .await;
    let err = renamed.try_cli(&["GETEX", "k"]).await.unwrap_err();
    assert!(err.contains("unknown command"), "{err}");
    assert_eq!(renamed.cli(&["SET", "k", "v", "EX", "10"]).await, "OK");
}

#[tokio::test(flavor = "multi_thread")]
async fn harness_cluster_forms_fails_over_and_promotes() {
    let mut cluster = RedisCluster::start(vec![]).await;
    for i in 0..30 {
        let k = format!("agui-a2a-gateway:harness:{i}");
        assert_eq!(
            cluster.nodes[0]
                .cli(&["-c", "SET", &k, &i.to_string()])
                .await,
            "OK"
        );
    }
    let k = "agui-a2a-gateway:harness:0";
    let master = cluster.master_for(k).await;
    let replica = cluster.replica_of(master).await;
    cluster.failover(replica).await;
    assert_eq!(cluster.master_for(k).await, replica);
    assert_eq!(cluster.get(k).await.as_deref(), Some("0"));
    cluster.sync_replicas().await;
    let promoted = cluster.kill_master(replica).await;
    assert_eq!(
        promoted, master,
        "the old master, now its replica, took over again"
    );
    assert_eq!(cluster.master_for(k).await, master);
    for i in 0..30 {
        let k = format!("agui-a2a-gateway:harness:{i}");
        assert_eq!(cluster.get(&k).await, Some(i.to_string()));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn harness_sentinel_failover_completes() {
    let setup = RedisSentinel::start().await;
    assert_eq!(setup.master().await, 0);
    setup.data[0].cli(&["SET", "agui-a2a-gateway:k", "v"]).await;
    assert_eq!(setup.data[0].cli(&["WAIT", "1", "5000"]).await, "1");
    let new = setup.failover().await;
    assert_eq!(new, 1);
    assert_eq!(setup.get("agui-a2a-gateway:k").await.as_deref(), Some("v"));
    assert_eq!(
        setup.data[1]
            .cli(&["SET", "agui-a2a-gateway:k2", "v2"])
            .await,
        "OK"
    );
    setup.wait_replica(0).await;
    let err = setup.data[0]
        .try_cli(&["SET", "agui-a2a-gateway:k3", "v"])
        .await
        .unwrap_err();
    assert!(err.starts_with("READONLY"), "{err}");
}
