//! The Redis binding store end to end (docs/design.md#4-threads-and-contexts, issue 7 items 4
//! and 5): a real `redis-server` per test on a free loopback port (no persistence, killed on
//! drop), real gateways on it, the Python a2a-sdk upstream. Runs are raw `RunAgentInput`
//! bodies sent without state, so only the binding store can carry a thread to its context.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agui_a2a_gateway::app;
use agui_a2a_gateway::config::{self, FileConfig, Overrides};
use serde_json::{json, Value};

use crate::support::{drive_message, free_port, upstream, Gateway};

/// A `redis-server` of this test alone.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one on a free port.
    pub async fn start() -> Self {
        for _ in 0..5 {
            let port = free_port();
            if let Some(server) = Self::try_start(port).await {
                return server;
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// Starts one on `port` (a restart after [`RedisServer::kill`]).
    pub async fn start_on(port: u16) -> Self {
        Self::try_start(port)
            .await
            .unwrap_or_else(|| panic!("could not start redis-server on port {port}"))
    }

    async fn try_start(port: u16) -> Option<Self> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run redis-server ({e}): install it (Debian: apt-get install redis-server); \
                     .ci/run does"
                )
            });
        let mut server = Self {
            port,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(child) = server.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    // Exited: the port was taken.
                    server.child = None;
                    return None;
                }
            }
            if server.command(&["PING"]).await.is_ok() {
                return Some(server);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the server at once (no shutdown handshake) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server: a stopped Redis accepts connections
    /// (the kernel does) but answers nothing, like a hung one.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// One command, on a connection of its own.
    pub async fn command(&self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        let client = redis::Client::open(self.url())?;
        let mut conn = tokio::time::timeout(
            Duration::from_secs(1),
            client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| redis::RedisError::from((redis::ErrorKind::Io, "connect timed out")))??;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query_async(&mut conn).await
    }

    async fn get(&self, key: &str) -> Option<String> {
        match self.command(&["GET", key]).await.unwrap() {
            redis::Value::Nil => None,
            v => Some(redis::from_redis_value(v).unwrap()),
        }
    }

    async fn ttl(&self, key: &str) -> i64 {
        redis::from_redis_value(self.command(&["TTL", key]).await.unwrap()).unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The gateway's key for the anonymous caller's thread on agent `ref`.
pub fn key(thread: &str) -> String {
    format!("agui-a2a-gateway:binding:anonymous:ref:{thread}")
}

fn config(store: &str) -> String {
    json!({
        "binding_store": store,
        "binding_ttl_s": 120,
        "agents": [{"name": "ref", "url": upstream("both")}],
    })
    .to_string()
}

/// One run without state: `extra` is merged into the body (`state`, `forwardedProps`).
/// Returns the SSE events.
pub async fn run(gw: &str, thread: &str, text: &str, extra: Value) -> Vec<Value> {
    let id = uuid::Uuid::new_v4();
    let mut body = json!({
        "threadId": thread,
        "runId": format!("run-{id}"),
        "messages": [{"id": format!("m-{id}"), "role": "user", "content": text}],
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let resp = reqwest::Client::new()
        .post(format!("{gw}/agents/ref"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// The run finished successfully; its contextId (`RUN_STARTED.metadata.a2a.contextId`).
pub fn finished_in(events: &[Value]) -> String {
    let types: Vec<_> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"RUN_STARTED"), "{types:?}");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED", "{last}");
    let context = events[0]["metadata"]["a2a"]["contextId"]
        .as_str()
        .expect("RUN_STARTED names the context")
        .to_owned();
    assert!(!context.is_empty());
    context
}

/// The A2A task of a run, from its `/a2a/task` state updates.
fn task_of(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "STATE_DELTA")
        .flat_map(|e| e["delta"].as_array().unwrap())
        .find(|op| op["path"] == "/a2a/task")
        .and_then(|op| op["value"]["id"].as_str())
        .expect("the run reports its task")
        .to_owned()
}

/// `/readyz` with `query` (`""` or `"?strict"`): its status and body.
pub async fn readyz(gw: &str, query: &str) -> (u16, Value) {
    let resp = reqwest::get(format!("{gw}/readyz{query}")).await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// Polls `/readyz?strict` (503 while the store does not answer) until it answers `want`;
/// panics after `within`.
async fn await_ready(gw: &str, want: u16, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = readyz(gw, "?strict").await;
        if status == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz still {status} after {within:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_gateway_continues_the_thread_from_redis() {
    let redis = RedisServer::start().await;
    let thread = format!("restart-{}", uuid::Uuid::new_v4());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (first, server) = Gateway::start_until(&config(&redis.url()), false, async {
        let _ = stopped.await;
    })
    .await;
    let turn1 = finished_in(&run(&first.base, &thread, "echo one", json!({})).await);
    assert_ne!(turn1, thread, "the threadId is never the contextId");
    // Ids only, under the documented key, living binding_ttl_s.
    assert_eq!(
        redis.get(&key(&thread)).await.as_deref(),
        Some(turn1.as_str())
    );
    let ttl = redis.ttl(&key(&thread)).await;
    assert!((100..=120).contains(&ttl), "ttl {ttl}");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the first gateway stops")
        .unwrap()
        .unwrap();

    // A new process on the same Redis: the thread lands in the same context, no state sent.
    let second = Gateway::start(&config(&redis.url()), false).await;
    redis
        .command(&["EXPIRE", &key(&thread), "50"])
        .await
        .unwrap();
    let turn2 = finished_in(&run(&second.base, &thread, "echo two", json!({})).await);
    assert_eq!(turn2, turn1);
    // Reading the binding renewed it.
    let ttl = redis.ttl(&key(&thread)).await;
    assert!((100..=120).contains(&ttl), "ttl after use {ttl}");

    // Without the store, the same thread would have started a new conversation.
    let forgetful = Gateway::start(&config("memory"), false).await;
    let elsewhere = finished_in(&run(&forgetful.base, &thread, "echo three", json!({})).await);
    assert_ne!(elsewhere, turn1);
    // ... and a new thread on Redis gets a context of its own.
    let other =
        finished_in(&run(&second.base, &format!("{thread}-b"), "echo four", json!({})).await);
    assert_ne!(other, turn1);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_on_one_redis_alternate_turns_in_one_context() {
    let redis = RedisServer::start().await;
    let a = Gateway::start(&config(&redis.url()), false).await;
    let b = Gateway::start(&config(&redis.url()), false).await;
    let thread = format!("replicas:{}", uuid::Uuid::new_v4());
    let first = finished_in(&run(&a.base, &thread, "echo turn one", json!({})).await);
    let mut tasks = std::collections::HashSet::new();
    for (i, gw) in [&b, &a, &b].into_iter().enumerate() {
        let events = run(
            &gw.base,
            &thread,
            &format!("echo turn {}", i + 2),
            json!({}),
        )
        .await;
        assert_eq!(finished_in(&events), first, "turn {}", i + 2);
        tasks.insert(task_of(&events));
    }
    assert_eq!(tasks.len(), 3, "each turn is a task of its own: {tasks:?}");
    // A threadId with ':' is escaped in its key, not split.
    let escaped = key(&thread.replace(':', "%3A"));
    assert_eq!(redis.get(&escaped).await.as_deref(), Some(first.as_str()));
}

/// Like `Gateway::start`, also handing back the store's error count.
async fn gateway_counting_store_errors(yaml: &str) -> (Gateway, std::sync::Arc<app::StoreErrors>) {
    let file: FileConfig = serde_yaml_ng::from_str(yaml).unwrap();
    let over = Overrides {
        listen: Some("127.0.0.1:0".into()),
        ..Default::default()
    };
    let app = app::build(config::settings(file, over).unwrap())
        .await
        .unwrap();
    let errors = app.binding_store_errors();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(app.serve(listener, std::future::pending()));
    (Gateway { base }, errors)
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_survive_a_redis_outage_and_bindings_return_with_redis() {
    let mut redis = RedisServer::start().await;
    let port = redis.port;
    let (gw, errors) = gateway_counting_store_errors(&config(&redis.url())).await;
    await_ready(&gw.base, 200, Duration::from_secs(10)).await;
    let thread = format!("outage-{}", uuid::Uuid::new_v4());
    let context = finished_in(&run(&gw.base, &thread, "echo before", json!({})).await);
    assert_eq!(errors.total(), 0);

    redis.kill();
    // Runs that carry their context go on, in that context, without waiting on the store.
    let started = Instant::now();
    let in_state = json!({"state": {"a2a": {"contextId": context}}});
    let events = run(&gw.base, &thread, "echo during", in_state).await;
    assert_eq!(finished_in(&events), context);
    let in_props = json!({"forwardedProps": {"a2a": {"contextId": context}}});
    let events = run(&gw.base, &thread, "echo during", in_props).await;
    assert_eq!(finished_in(&events), context);
    // A run that needed the store starts a new conversation rather than failing.
    let fresh = finished_in(&run(&gw.base, &thread, "echo lost", json!({})).await);
    assert_ne!(fresh, context);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(errors.total() >= 1, "failed store calls are counted");
    // docs/operations.md#readiness: a store down is not this replica's to fix: 200,
    // degraded, the store named; 503 only when asked strictly.
    let (status, body) = readyz(&gw.base, "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "degraded");
    assert_eq!(body["bindingStore"]["store"], "redis", "{body}");
    assert_eq!(body["bindingStore"]["kind"], "connection", "{body}");
    assert_eq!(body["agents"], json!([]), "{body}");
    let (status, strict) = readyz(&gw.base, "?strict").await;
    assert_eq!(status, 503, "{strict}");
    assert_eq!(strict["status"], "not_ready");
    assert_eq!(strict["bindingStore"]["store"], "redis", "{strict}");
    for body in [&body, &strict] {
        assert!(
            !body.to_string().contains("127.0.0.1"),
            "no address in a public body: {body}"
        );
    }

    // Back on the same port, empty: ready again by itself, and bindings work again.
    let redis = RedisServer::start_on(port).await;
    let back = Instant::now();
    let body = await_ready(&gw.base, 200, Duration::from_secs(5)).await;
    assert_eq!(body["status"], "ready");
    eprintln!("ready again {:?} after Redis returned", back.elapsed());
    let thread = format!("{thread}-after");
    let context = finished_in(&run(&gw.base, &thread, "echo after", json!({})).await);
    assert_eq!(
        redis.get(&key(&thread)).await.as_deref(),
        Some(context.as_str())
    );
    let again = finished_in(&run(&gw.base, &thread, "echo again", json!({})).await);
    assert_eq!(again, context);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_starts_with_redis_down_and_connects_when_it_comes() {
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let gw = Gateway::start(&config(&url), false).await;
    let thread = format!("late-{}", uuid::Uuid::new_v4());
    let context = finished_in(&run(&gw.base, &thread, "echo early", json!({})).await);
    let body = await_ready(&gw.base, 503, Duration::from_secs(5)).await;
    assert_eq!(body["bindingStore"]["kind"], "connection", "{body}");
    let (status, body) = readyz(&gw.base, "").await;
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("degraded")),
        "{body}"
    );
    assert_eq!(body["bindingStore"]["kind"], "connection", "{body}");
    let redis = RedisServer::start_on(port).await;
    await_ready(&gw.base, 200, Duration::from_secs(5)).await;
    // The binding of the run before Redis came was lost, not the ones after.
    assert_eq!(redis.get(&key(&thread)).await, None);
    let after = finished_in(&run(&gw.base, &thread, "echo later", json!({})).await);
    assert_ne!(after, context);
    let again = finished_in(&run(&gw.base, &thread, "echo again", json!({})).await);
    assert_eq!(again, after);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_redis_costs_a_run_at_most_the_call_timeout() {
    let redis = RedisServer::start().await;
    let gw = Gateway::start(&config(&redis.url()), false).await;
    await_ready(&gw.base, 200, Duration::from_secs(10)).await;
    let thread = format!("hung-{}", uuid::Uuid::new_v4());
    let context = finished_in(&run(&gw.base, &thread, "echo before", json!({})).await);

    redis.signal("STOP");
    let started = Instant::now();
    let fresh = finished_in(&run(&gw.base, &thread, "echo hung", json!({})).await);
    let took = started.elapsed();
    // The lookup waited out its 1 s bound and the run went on as a new conversation.
    assert_ne!(fresh, context);
    assert!(took < Duration::from_millis(2500), "{took:?}");
    let started = Instant::now();
    let (status, body) = readyz(&gw.base, "?strict").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["bindingStore"]["kind"], "timeout", "{body}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );

    redis.signal("CONT");
    await_ready(&gw.base, 200, Duration::from_secs(5)).await;
    // Bindings work again: the one from before the hang, or the hung run's if its write
    // was still queued in the socket when Redis woke up.
    let again = finished_in(&run(&gw.base, &thread, "echo after", json!({})).await);
    assert!(again == context || again == fresh, "{again}");
    assert_eq!(
        redis.get(&key(&thread)).await.as_deref(),
        Some(again.as_str())
    );
    let after = finished_in(&run(&gw.base, &thread, "echo after", json!({})).await);
    assert_eq!(after, again);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_thread_list_of_a_0_3_agent_is_shared_through_redis() {
    // A2A 0.3 has no ListTasks: a replica lists the threads another one ran, from Redis.
    let redis = RedisServer::start().await;
    let yaml = json!({"binding_store": redis.url(), "binding_ttl_s": 120,
        "agents": [{"name": "old", "url": upstream("0.3")}]})
    .to_string();
    let (one, two) = (
        Gateway::start(&yaml, false).await,
        Gateway::start(&yaml, false).await,
    );
    let thread = format!("listed-{}", uuid::Uuid::new_v4());
    drive_message(&one.agent_url("old"), &thread, "approve").await;
    let list: Value = reqwest::get(format!("{}/threads", two.agent_url("old")))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["source"], "bindings");
    let listed = list["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["threadId"] == thread.as_str())
        .unwrap_or_else(|| panic!("{thread} not in {list}"));
    assert_eq!(listed["status"], "input-required");
}
