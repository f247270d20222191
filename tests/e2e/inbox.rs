//! The live inbox (docs/design.md#the-live-inbox) against the a2a-sdk reference server: one
//! shared `ListTasks` per agent per interval whatever the number of viewers (counted by a
//! proxy in front of the real agent), a run that waits for a human showing on the change
//! feed, `Last-Event-ID` resumes and fresh snapshots, two replicas on one Redis (one poll per
//! interval, a change seen by one reaches a subscriber of the other, and a run's or a push's
//! change relayed to the other within a second), and forged, unknown,
//! oversized and flooding pushes refused and counted.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::redis::RedisServer;
use crate::support::*;

/// A proxy in front of a real agent that counts the agent's `ListTasks` calls; the card it
/// relays names the proxy, so every call of the gateway goes through it.
struct Counting {
    url: String,
    lists: Arc<Mutex<usize>>,
}

#[derive(Clone)]
struct Target {
    upstream: String,
    me: String,
    lists: Arc<Mutex<usize>>,
}

impl Counting {
    async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let lists = Arc::new(Mutex::new(0));
        let target = Target {
            upstream: upstream.trim_end_matches('/').to_owned(),
            me: url.clone(),
            lists: lists.clone(),
        };
        let app = axum::Router::new().fallback(relay).with_state(target);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, lists }
    }

    fn lists(&self) -> usize {
        *self.lists.lock().unwrap()
    }
}

async fn relay(State(t): State<Target>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 24).await.unwrap();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let rpc: Option<Value> = serde_json::from_slice(&body).ok();
    let method = rpc
        .as_ref()
        .and_then(|v| v["method"].as_str())
        .unwrap_or("");
    let rest_list = parts.method == "GET" && parts.uri.path().ends_with("/tasks");
    if method == "ListTasks" || method == "tasks/list" || rest_list {
        *t.lists.lock().unwrap() += 1;
    }
    let mut out =
        reqwest::Client::new().request(parts.method.clone(), format!("{}{path}", t.upstream));
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" {
            out = out.header(name, value);
        }
    }
    let resp = out.body(body).send().await.unwrap();
    let mut builder = Response::builder().status(resp.status());
    for (name, value) in resp.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            builder = builder.header(name, value);
        }
    }
    if path.contains("agent-card.json") || path.contains("agent.json") {
        let card = resp.text().await.unwrap().replace(&t.upstream, &t.me);
        return builder.body(Body::from(card)).unwrap();
    }
    builder
        .body(Body::from_stream(resp.bytes_stream()))
        .unwrap()
}

/// One SSE event of the feed.
#[derive(Debug, Clone)]
pub struct Event {
    pub event: String,
    pub id: String,
    pub data: Value,
}

/// A subscriber of `GET /threads/events` (also tests/e2e/push.rs's).
pub struct Feed {
    events: std::pin::Pin<
        Box<
            dyn futures::Stream<
                    Item = Result<
                        eventsource_stream::Event,
                        eventsource_stream::EventStreamError<reqwest::Error>,
                    >,
                > + Send,
        >,
    >,
}

impl Feed {
    pub async fn open(base: &str, last_id: Option<&str>) -> Result<Self, (u16, Value)> {
        use eventsource_stream::Eventsource;
        let mut req = reqwest::Client::new().get(format!("{base}/threads/events"));
        if let Some(id) = last_id {
            req = req.header("Last-Event-ID", id);
        }
        let resp = req.send().await.unwrap();
        if resp.status() != 200 {
            let status = resp.status().as_u16();
            return Err((status, resp.json().await.unwrap()));
        }
        Ok(Self {
            events: Box::pin(resp.bytes_stream().eventsource()),
        })
    }

    pub async fn next(&mut self, within: Duration) -> Option<Event> {
        let e = tokio::time::timeout(within, self.events.next())
            .await
            .ok()??
            .ok()?;
        Some(Event {
            event: e.event,
            id: e.id,
            data: serde_json::from_str(&e.data).unwrap_or(Value::Null),
        })
    }

    /// `base`'s feed, its first event (the snapshot) read.
    pub async fn past_snapshot(base: &str) -> Feed {
        let mut feed = Feed::open(base, None).await.unwrap();
        let first = feed.next(Duration::from_secs(10)).await.unwrap();
        assert_eq!(first.event, "snapshot", "{first:?}");
        feed
    }

    /// The first `thread` event for which `pick` holds, within `within`.
    pub async fn until(&mut self, within: Duration, pick: impl Fn(&Value) -> bool) -> Event {
        let found = self.find(within, pick).await;
        found.unwrap_or_else(|| panic!("no such thread event within {within:?}"))
    }

    /// Like [`Feed::until`], `None` when none came within `within`.
    pub async fn find(&mut self, within: Duration, pick: impl Fn(&Value) -> bool) -> Option<Event> {
        let end = Instant::now() + within;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.next(left).await {
                Some(e) if e.event == "thread" && pick(&e.data) => return Some(e),
                Some(_) => {}
                None => break,
            }
        }
        None
    }
}

fn config(agents: &[(&str, &str)], extra: Value) -> String {
    let list: Vec<Value> = agents
        .iter()
        .map(|(n, u)| json!({"name": n, "url": u}))
        .collect();
    let mut config = json!({"agents": list, "inbox": {"poll_s": 1}});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            config[k] = v;
        }
    }
    config.to_string()
}

/// A thread of the ref agent that waits for a human: the task in `input-required`.
async fn wait_for_approval(gw: &Gateway, agent: &str, thread: &str) {
    let step = drive_message(&gw.agent_url(agent), thread, "approve").await;
    assert_accepted(&step);
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_viewers_cost_each_agent_one_list_per_interval_and_see_approvals() {
    // Ten agents (one server of this test's own behind ten counting proxies), so the polls
    // read only this test's few conversations.
    let real = Upstream::start("1.0");
    let proxies = futures::future::join_all((0..10).map(|_| Counting::start(&real.url))).await;
    let agents: Vec<(String, String)> = proxies
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("a{i}"), p.url.clone()))
        .collect();
    let named: Vec<(&str, &str)> = agents
        .iter()
        .map(|(n, u)| (n.as_str(), u.as_str()))
        .collect();
    let bounds = json!({"inbox": {"poll_s": 1, "max_subscribers_per_caller": 50}});
    let gw = Gateway::start(&config(&named, bounds), false).await;
    wait_ready(&gw).await;
    let started = Instant::now();
    let before: Vec<usize> = proxies.iter().map(Counting::lists).collect();
    let mut feeds = Vec::new();
    for _ in 0..50 {
        let mut feed = Feed::open(&gw.base, None).await.expect("subscribed");
        let first = feed.next(Duration::from_secs(10)).await.unwrap();
        assert_eq!(first.event, "snapshot", "{first:?}");
        assert!(first.data["threads"].is_array(), "{first:?}");
        feeds.push(feed);
    }
    // The 51st of one caller: refused before any stream.
    let (status, refused) = Feed::open(&gw.base, None).await.err().expect("refused");
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (429, Some("too_many_subscribers"))
    );
    for _ in 0..20 {
        let inbox = get_json(format!("{}/threads", gw.base)).await;
        assert_eq!(inbox["unavailable"], json!([]), "{inbox}");
        assert!(inbox["readAt"].is_string(), "{inbox}");
    }
    let thread = format!("inbox-wait-{}", std::process::id());
    wait_for_approval(&gw, "a0", &thread).await;
    // The run tells the inbox each state (submitted, working, input-required).
    let seen = feeds[49]
        .until(Duration::from_secs(5), waiting_on(&thread))
        .await;
    assert_eq!(seen.data["agent"], "a0");
    assert!(!seen.id.is_empty());
    let elapsed = started.elapsed().as_secs_f64();
    for (p, before) in proxies.iter().zip(before) {
        let lists = p.lists() - before;
        // One per interval (1 s), a start-up read aside; per viewer it would be 70 at least.
        let most = elapsed.ceil() as usize + 2;
        assert!(
            (1..=most).contains(&lists),
            "{lists} ListTasks in {elapsed:.1} s"
        );
    }
    let inbox = get_json(format!("{}/threads?status=input-required", gw.base)).await;
    assert!(
        inbox["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["threadId"] == json!(thread)),
        "{inbox}"
    );
    let metrics = metrics_text(&gw).await;
    assert!(
        metrics.contains("agui_gateway_feed_subscribers 50"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn last_event_id_resumes_within_the_window_else_a_fresh_snapshot() {
    let gw = Gateway::start(&config(&[("ref", upstream("1.0"))], json!({})), false).await;
    let mut feed = Feed::open(&gw.base, None).await.unwrap();
    let snapshot = feed.next(Duration::from_secs(10)).await.unwrap();
    assert_eq!(snapshot.event, "snapshot");
    let thread = format!("resume-{}", std::process::id());
    wait_for_approval(&gw, "ref", &thread).await;
    let change = feed
        .until(Duration::from_secs(5), |t| t["threadId"] == json!(thread))
        .await;
    drop(feed);
    // Resumed after the snapshot: the change missed, not a snapshot.
    let mut resumed = Feed::open(&gw.base, Some(&snapshot.id)).await.unwrap();
    let first = resumed.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first.event, "thread", "{first:?}");
    let mut seen = vec![first];
    while seen.last().unwrap().id != change.id {
        seen.push(
            resumed
                .next(Duration::from_secs(5))
                .await
                .expect("the change"),
        );
    }
    assert_eq!(seen.last().unwrap().data, change.data);
    // An id of no process of ours: a fresh snapshot that holds the thread.
    let mut fresh = Feed::open(&gw.base, Some("elsewhere-7")).await.unwrap();
    let first = fresh.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first.event, "snapshot");
    assert!(
        first.data["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["threadId"] == json!(thread)),
        "{first:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_on_one_redis_poll_once_per_interval_and_share_changes() {
    let redis = RedisServer::start().await;
    let proxy = Counting::start(upstream("1.0")).await;
    let store = json!({"binding_store": redis.url()});
    let yaml = config(&[("ref", &proxy.url)], store);
    let one = Gateway::start(&yaml, false).await;
    let two = Gateway::start(&yaml, false).await;
    let mut feed = Feed::past_snapshot(&two.base).await;
    let started = Instant::now();
    let before = proxy.lists();
    // Through the other replica: relayed at once, and polled by whichever holds the
    // interval, seen by both.
    let thread = format!("replicas-{}", std::process::id());
    wait_for_approval(&one, "ref", &thread).await;
    let seen = feed
        .until(Duration::from_secs(6), waiting_on(&thread))
        .await;
    assert_eq!(seen.data["lastTask"]["state"], "input-required");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let elapsed = started.elapsed().as_secs_f64();
    let lists = proxy.lists() - before;
    assert!(
        (1..=elapsed.ceil() as usize + 1).contains(&lists),
        "{lists} ListTasks in {elapsed:.1} s by two replicas"
    );
}

/// The `sha256` hex digest the store keeps of a push token.
fn token_digest(token: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(token.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect::<String>()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_one_replica_sees_reaches_the_other_replicas_feed_within_a_second() {
    let redis = RedisServer::start().await;
    // An interval no test waits for: the shared poll cannot be what carries the changes.
    let extra = json!({
        "binding_store": redis.url(),
        "inbox": {"poll_s": 3600},
        "push": {"enabled": true, "public_url": "http://127.0.0.1:9"},
    });
    let yaml = config(&[("ref", upstream("1.0"))], extra);
    let one = Gateway::start(&yaml, false).await;
    let two = Gateway::start(&yaml, false).await;
    let mut feed = Feed::past_snapshot(&two.base).await;
    // A run on the first replica whose task waits for a human: its changes (submitted,
    // working, input-required) on the second replica's feed.
    approval_reaches(&one, &mut feed, &format!("relayed-{}", std::process::id())).await;
    // A push the first replica accepts.
    let token = "a-token-of-the-relayed-task-0123456789abcdefgh";
    redis
        .command(&[
            "SET",
            "agui-a2a-gateway:push:ref:relayed-task",
            token_digest(token).as_str(),
        ])
        .await
        .unwrap();
    let push = json!({"statusUpdate": {"taskId": "relayed-task", "contextId": "relayed-context",
        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-01T00:00:01Z"}}});
    let resp = reqwest::Client::new()
        .post(format!("{}/a2a/push/ref", one.base))
        .header("content-type", "application/json")
        .header("X-A2A-Notification-Token", token)
        .body(push.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
    let pushed = Instant::now();
    let seen = feed
        .until(Duration::from_secs(1), |t| {
            t["contextId"] == json!("relayed-context")
        })
        .await;
    assert_eq!(seen.data["lastTask"]["id"], "relayed-task", "{seen:?}");
    assert!(pushed.elapsed() <= Duration::from_secs(1));
    // Counted: out by the first replica, in by the second; nothing echoed back.
    let relayed = "agui_gateway_inbox_relayed_total";
    let (out, inn) = (r#"direction="out""#, r#"direction="in""#);
    assert!(metric_sum(&one, relayed, out).await >= 2);
    assert!(metric_sum(&two, relayed, inn).await >= 2);
    let echoed = metric_sum(&two, relayed, out).await;
    assert_eq!(echoed, 0, "what came from the relay is not relayed again");
    let own = metric_sum(&one, relayed, inn).await;
    assert_eq!(own, 0, "its own messages ignored");
    // The subscriptions cut by the server: each replica subscribes again (and re-reads the
    // shared reads), and changes flow again.
    let resubscribed = "agui_gateway_inbox_relay_resubscribed_total";
    assert!(
        metrics_text(&two).await.contains(resubscribed),
        "the metric is there"
    );
    assert_eq!(metric_sum(&two, resubscribed, "").await, 0);
    redis
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .await
        .unwrap();
    wait_until(
        "both replicas subscribed again",
        Duration::from_secs(10),
        async || {
            let counts = [
                metric_sum(&one, resubscribed, "").await,
                metric_sum(&two, resubscribed, "").await,
            ];
            if counts.iter().all(|&n| n >= 1) {
                Ok(())
            } else {
                Err(format!("resubscribed: {counts:?}"))
            }
        },
    )
    .await;
    approval_reaches(
        &one,
        &mut feed,
        &format!("relayed-again-{}", std::process::id()),
    )
    .await;
}

/// Picks the feed's change of `thread` to waiting for a human (`input-required`).
pub fn waiting_on(thread: &str) -> impl Fn(&Value) -> bool + '_ {
    move |t| t["threadId"] == thread && t["status"] == "input-required"
}

/// A run on `gw`'s agent `ref` that ends waiting for a human on `thread`: its
/// `input-required` on `feed` (another replica's, say) within a second of the run's end.
pub async fn approval_reaches(gw: &Gateway, feed: &mut Feed, thread: &str) {
    wait_for_approval(gw, "ref", thread).await;
    let ran = Instant::now();
    feed.until(Duration::from_secs(1), waiting_on(thread)).await;
    assert!(ran.elapsed() <= Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn forged_unknown_oversized_and_flooding_pushes_are_refused_and_counted() {
    let redis = RedisServer::start().await;
    let extra = json!({
        "binding_store": redis.url(),
        "push": {"enabled": true, "public_url": "http://127.0.0.1:9", "max_body_bytes": 2048,
                 "max_per_second": 5},
    });
    let gw = Gateway::start(&config(&[("ref", upstream("1.0"))], extra), false).await;
    let push_url = format!("{}/a2a/push/ref", gw.base);
    // A task registered as the run path registers it: the token's digest in the store.
    let token = "a-token-of-the-task-0123456789abcdefghijklmno";
    let digest = token_digest(token);
    redis
        .command(&[
            "SET",
            "agui-a2a-gateway:push:ref:pushed-task",
            digest.as_str(),
        ])
        .await
        .unwrap();
    let update = |task: &str, state: &str, at: &str| {
        json!({"statusUpdate": {"taskId": task, "contextId": "pushed-context",
            "status": {"state": state, "timestamp": at}}})
    };
    let client = reqwest::Client::new();
    let send = |url: String, token: Option<&'static str>, body: String| {
        let mut req = client
            .post(url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = token {
            req = req.header("X-A2A-Notification-Token", t);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let retry = resp.headers().get("retry-after").is_some();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            (status, retry, body)
        }
    };
    let pause = || tokio::time::sleep(Duration::from_millis(250));
    let at = "2026-01-01T00:00:01Z";
    let refused = [
        (
            "unknown agent",
            format!("{}/a2a/push/nobody", gw.base),
            Some(token),
            update("pushed-task", "TASK_STATE_INPUT_REQUIRED", at).to_string(),
        ),
        (
            "no token",
            push_url.clone(),
            None,
            update("pushed-task", "TASK_STATE_INPUT_REQUIRED", at).to_string(),
        ),
        (
            "forged",
            push_url.clone(),
            Some("forged-token"),
            update("pushed-task", "TASK_STATE_INPUT_REQUIRED", at).to_string(),
        ),
        (
            "unknown task",
            push_url.clone(),
            Some(token),
            update("other-task", "TASK_STATE_INPUT_REQUIRED", at).to_string(),
        ),
        (
            "garbage",
            push_url.clone(),
            Some(token),
            "{\"not\": \"a push\"}".to_owned(),
        ),
    ];
    let mut answers = Vec::new();
    for (what, url, token, body) in refused {
        pause().await;
        let (status, _, body) = send(url, token, body).await;
        assert_eq!(status, 401, "{what}: {body}");
        answers.push(body);
    }
    assert!(
        answers.windows(2).all(|w| w[0] == w[1]),
        "alike: {answers:?}"
    );
    pause().await;
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(4096));
    let (status, _, body) = send(push_url.clone(), Some(token), big).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("body_too_large"))
    );
    let inbox = get_json(format!("{}/threads", gw.base)).await;
    assert!(
        !inbox.to_string().contains("pushed-context"),
        "nothing changed: {inbox}"
    );
    // The right token: accepted, and the inbox knows at once.
    pause().await;
    let good = update("pushed-task", "TASK_STATE_INPUT_REQUIRED", at).to_string();
    let (status, _, _) = send(push_url.clone(), Some(token), good.clone()).await;
    assert_eq!(status, 200);
    let inbox = get_json(format!("{}/threads?status=input-required", gw.base)).await;
    assert!(inbox.to_string().contains("pushed-context"), "{inbox}");
    // Replayed and reordered (delivery is at least once): the same push again, and an older
    // update arriving late, are taken and change nothing.
    pause().await;
    let older = update("pushed-task", "TASK_STATE_WORKING", "2000-01-01T00:00:00Z").to_string();
    for body in [good.clone(), older] {
        let (status, _, _) = send(push_url.clone(), Some(token), body).await;
        assert_eq!(status, 200);
    }
    let pushed_item = |list: &Value| {
        list["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["contextId"] == "pushed-context")
            .cloned()
    };
    let replayed = get_json(format!("{}/threads?status=input-required", gw.base)).await;
    assert_eq!(pushed_item(&replayed), pushed_item(&inbox), "{replayed}");
    assert!(pushed_item(&replayed).is_some());
    // Flooding: past push.max_per_second, 429 with Retry-After.
    let mut limited = 0;
    for _ in 0..20 {
        let (status, retry, _) = send(push_url.clone(), Some(token), good.clone()).await;
        if status == 429 {
            assert!(retry);
            limited += 1;
        }
    }
    assert!(limited >= 10, "{limited} of 20 limited");
    let metrics = metrics_text(&gw).await;
    for line in [
        r#"agui_gateway_push_received_total{agent="",result="unknown_agent"} 1"#,
        r#"agui_gateway_push_received_total{agent="ref",result="missing_token"} 1"#,
        r#"agui_gateway_push_received_total{agent="ref",result="wrong_token"} 1"#,
        r#"agui_gateway_push_received_total{agent="ref",result="unknown_task"} 1"#,
        r#"agui_gateway_push_received_total{agent="ref",result="malformed"} 1"#,
        r#"agui_gateway_push_received_total{agent="ref",result="too_large"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    assert!(metrics.contains(&format!(
        r#"agui_gateway_push_received_total{{agent="ref",result="rate_limited"}} {limited}"#
    )));
}
