//! Benchmark: the live inbox (docs/design.md#the-live-inbox) against what the console did
//! before it, in one run. For 1, 10 and 100 reviewers, three ways of learning that a task
//! changed: every reviewer polling `GET /agents/{name}/threads` every 4 s (today's console,
//! read live per request), every reviewer holding a `GET /threads/events` feed kept by the
//! shared poll (`inbox.poll_s`), and the same feed kept by A2A push notifications. Prints one
//! Markdown table: the agent's requests per minute (counted by method by a proxy of this
//! benchmark in front of it; pushes, agent → gateway, from the gateway's `/metrics`), and the
//! latency from a task's state change to the first reviewer who sees it, and to the last one,
//! p50/p99 over the changes made. Not a test: nothing here fails on a number.
//!
//! `cargo bench --bench inbox`. Env overrides:
//! - BENCH_INBOX_SECS (18): how long each mode × reviewers cell runs; changes are made during
//!   all but its last BENCH_INBOX_GRACE_SECS (5), so the last ones can still be seen.
//! - BENCH_INBOX_GAP_MS (1500): one change every this many ms.
//! - BENCH_INBOX_POLL_S (2): the shared poll's `inbox.poll_s`.
//! - BENCH_INBOX_REVIEWERS ("1,10,100").
//!
//! The upstream is the a2a-sdk 1.3.0 reference agent (tests/upstream/ref_agent.py, the
//! repository's `.venv`), two processes: one plain, one with `--push` (the SDK's own push
//! sender). Latency is measured from the task's own status timestamp (the agent's clock, this
//! machine's) to the moment a reviewer holds the change, so it needs no cooperation from the
//! gateway. How each change is made, with no gateway run watching it:
//! - polling and shared poll: a blocking A2A `SendMessage` "approve" sent straight to the
//!   agent (not through the proxy, not through the gateway), on a context of its own; the
//!   change is the task entering `input-required`. The agent has `visibility: shared`, so
//!   every reviewer may see a context not created through the gateway.
//! - push: a run of `slow 10` through the gateway (so the gateway registered a push config
//!   for the task), whose AG-UI stream is dropped after its first event; the task completes
//!   on its own 1 s later and the agent pushes it; the change is the task's completion.
//!
//! The polling mode's gateway has `inbox.poll_s` 3600 (its one start-up read falls before the
//! window), so the counts are the reviewers' alone.

use std::collections::{HashMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};

#[path = "../tests/e2e/ready_line.rs"]
mod ready_line;
#[path = "support.rs"]
mod support;

use support::{env_or, free_port, percentile};

/// Today's console: one `GET /agents/{name}/threads` per reviewer every 4 s.
const CONSOLE_POLL: Duration = Duration::from_secs(4);

/// The agents, as the gateway names them.
const PLAIN: &str = "ref";
const PUSHED: &str = "ref-push";

/// A process ended when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The a2a-sdk reference agent (`--versions 1.0`, and `--push` if `push`): the process and
/// its URL, from its `READY <url>` line.
fn start_ref_agent(push: bool) -> (Proc, String) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "the Python venv with a2a-sdk: {}",
        python.display()
    );
    let mut cmd = Command::new(python);
    cmd.arg(root.join("tests/upstream/ref_agent.py"))
        .args(["--versions", "1.0", "--parent-pid"])
        .arg(std::process::id().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if push {
        cmd.arg("--push");
    }
    let mut child = cmd.spawn().expect("start the reference agent");
    let within = ready_line::READY_WITHIN;
    let url = ready_line::read_ready(child.stdout.take().unwrap(), within)
        .unwrap_or_else(|| panic!("the reference agent's READY line within {within:?}"));
    (Proc(child), url)
}

/// A proxy in front of an agent that counts its requests by A2A method (JSON-RPC `method`,
/// else HTTP method and path; the card as `card`); the card it relays names the proxy, so
/// every call of the gateway goes through it.
struct Counting {
    url: String,
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

#[derive(Clone)]
struct Target {
    upstream: String,
    me: String,
    counts: Arc<Mutex<HashMap<String, usize>>>,
    http: reqwest::Client,
}

impl Counting {
    async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let target = Target {
            upstream: upstream.trim_end_matches('/').to_owned(),
            me: url.clone(),
            counts: counts.clone(),
            http: reqwest::Client::new(),
        };
        let app = axum::Router::new().fallback(relay).with_state(target);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, counts }
    }

    fn snapshot(&self) -> HashMap<String, usize> {
        self.counts.lock().unwrap().clone()
    }
}

async fn relay(State(t): State<Target>, req: Request) -> Response {
    let bad_gateway = || Response::builder().status(502).body(Body::empty()).unwrap();
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 1 << 24).await else {
        return bad_gateway();
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let card = path.contains("agent-card.json") || path.contains("agent.json");
    let rpc: Option<Value> = serde_json::from_slice(&body).ok();
    let key = match rpc.as_ref().and_then(|v| v["method"].as_str()) {
        Some(method) => method.to_owned(),
        None if card => "card".to_owned(),
        None => format!("{} {}", parts.method, parts.uri.path()),
    };
    *t.counts.lock().unwrap().entry(key).or_default() += 1;
    let mut out = t
        .http
        .request(parts.method.clone(), format!("{}{path}", t.upstream));
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" {
            out = out.header(name, value);
        }
    }
    let Ok(resp) = out.body(body).send().await else {
        return bad_gateway();
    };
    let mut builder = Response::builder().status(resp.status());
    for (name, value) in resp.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            builder = builder.header(name, value);
        }
    }
    if card {
        let Ok(text) = resp.text().await else {
            return bad_gateway();
        };
        let card = text.replace(&t.upstream, &t.me);
        return builder.body(Body::from(card)).unwrap();
    }
    builder
        .body(Body::from_stream(resp.bytes_stream()))
        .unwrap()
}

/// The gateway binary with the config `config` (JSON, which YAML reads) on `port`, once
/// every agent's card was read.
async fn start_gateway(port: u16, config: &Value) -> Proc {
    let file = std::env::temp_dir().join(format!(
        "agui-gateway-bench-inbox-{}-{port}.yaml",
        std::process::id()
    ));
    std::fs::write(&file, config.to_string()).expect("write the benchmark config");
    let child = Command::new(env!("CARGO_BIN_EXE_agui-a2a-gateway"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--config"])
        .arg(&file)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the gateway binary");
    let gateway = Proc(child);
    for _ in 0..200 {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/readyz?strict")).await {
            if r.status().is_success() {
                return gateway;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("gateway did not become ready");
}

/// How reviewers learn of changes.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Each polls `GET /agents/{name}/threads` every [`CONSOLE_POLL`].
    Polling,
    /// Each holds a feed; the inbox is kept by the shared poll.
    SharedPoll,
    /// Each holds a feed; the inbox is kept by pushes.
    Push,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Polling => "per-reviewer polling (every 4 s)",
            Mode::SharedPoll => "shared poll + feed",
            Mode::Push => "push + feed",
        }
    }

    fn agent(self) -> &'static str {
        if self == Mode::Push {
            PUSHED
        } else {
            PLAIN
        }
    }

    /// The state (`lastTask.state`, the 0.3 spelling) a change's task ends in.
    fn target(self) -> &'static str {
        if self == Mode::Push {
            "completed"
        } else {
            "input-required"
        }
    }
}

/// What the reviewers saw: per change (its threadId or contextId), each reviewer's latency.
#[derive(Default)]
struct Seen {
    keys: HashSet<String>,
    latencies: HashMap<String, Vec<Option<f64>>>,
    /// Items that matched but carried no parseable status time.
    untimed: usize,
}

type Shared = Arc<Mutex<Seen>>;

/// Records `item` (a thread of the inbox or of the agent's list) as seen by `reviewer` of
/// `of` reviewers, now, if it is one of the changes made and its last task is in `target`.
fn observe(seen: &Shared, item: &Value, target: &str, reviewer: usize, of: usize) {
    if item["lastTask"]["state"] != target {
        return;
    }
    let mut seen = seen.lock().unwrap();
    let key = [&item["threadId"], &item["contextId"]]
        .into_iter()
        .filter_map(Value::as_str)
        .find(|k| seen.keys.contains(*k))
        .map(str::to_owned);
    let Some(key) = key else { return };
    let at = item["lastTask"]["updatedAt"].as_str().and_then(|s| {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
    });
    let Some(at) = at else {
        seen.untimed += 1;
        return;
    };
    let latency = (time::OffsetDateTime::now_utc() - at).as_seconds_f64();
    let slot = seen
        .latencies
        .entry(key)
        .or_insert_with(|| vec![None; of])
        .get_mut(reviewer);
    if let Some(slot @ None) = slot {
        *slot = Some(latency);
    }
}

/// One of `of` reviewers of a cell, and where it records what it saw.
#[derive(Clone)]
struct Reviewer {
    http: reqwest::Client,
    base: String,
    mode: Mode,
    seen: Shared,
    index: usize,
    of: usize,
}

impl Reviewer {
    fn observe(&self, item: &Value) {
        observe(&self.seen, item, self.mode.target(), self.index, self.of);
    }

    /// Today's console: `GET /agents/{agent}/threads` every [`CONSOLE_POLL`], the reviewers'
    /// phases spread evenly over the interval (as independent consoles would be, on average).
    async fn poll(self) {
        let phase = CONSOLE_POLL.mul_f64(self.index as f64 / self.of as f64);
        tokio::time::sleep(phase).await;
        let mut every = tokio::time::interval(CONSOLE_POLL);
        let url = format!("{}/agents/{}/threads", self.base, self.mode.agent());
        loop {
            every.tick().await;
            let Ok(resp) = self.http.get(&url).timeout(CONSOLE_POLL).send().await else {
                continue;
            };
            let Ok(list) = resp.json::<Value>().await else {
                continue;
            };
            for item in list["threads"].as_array().into_iter().flatten() {
                self.observe(item);
            }
        }
    }

    /// A reviewer with a feed: opens `GET /threads/events`, reports once its snapshot came
    /// (`ready`), then records the changes.
    async fn follow(self, ready: tokio::sync::mpsc::Sender<bool>) {
        let opened = self
            .http
            .get(format!("{}/threads/events", self.base))
            .send();
        let resp = match opened.await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                eprintln!("feed refused: {}", r.status());
                let _ = ready.send(false).await;
                return;
            }
            Err(e) => {
                eprintln!("feed failed: {e}");
                let _ = ready.send(false).await;
                return;
            }
        };
        let mut events = resp.bytes_stream().eventsource();
        let mut announced = false;
        while let Some(Ok(event)) = events.next().await {
            if !announced && event.event == "snapshot" {
                announced = true;
                let _ = ready.send(true).await;
            }
            if event.event == "thread" {
                if let Ok(item) = serde_json::from_str::<Value>(&event.data) {
                    self.observe(&item);
                }
            }
        }
        if !announced {
            let _ = ready.send(false).await;
        }
    }
}

/// One change with no gateway run watching it (the module's header): returns its key.
async fn make_change(
    http: &reqwest::Client,
    mode: Mode,
    agent_url: &str,
    base: &str,
    seen: &Shared,
) {
    let key = uuid::Uuid::new_v4().to_string();
    seen.lock().unwrap().keys.insert(key.clone());
    if mode == Mode::Push {
        let body = json!({"threadId": key, "runId": format!("r-{key}"), "protocolVersion": "1.0",
            "messages": [{"id": format!("m-{key}"), "role": "user", "content": "slow 10"}]});
        let resp = http
            .post(format!("{base}/agents/{PUSHED}"))
            .header("accept", "text/event-stream")
            .json(&body)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        if let Ok(resp) = resp {
            let mut events = resp.bytes_stream().eventsource();
            // The first event, then the stream is dropped: the run no longer watches.
            let _ = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
        }
        return;
    }
    let message = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
        "contextId": key, "role": "ROLE_USER", "parts": [{"text": "approve"}]}});
    let _ = http
        .post(agent_url)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message}))
        .timeout(Duration::from_secs(10))
        .send()
        .await;
}

/// The pushes the gateway accepted from `agent` so far (`/metrics`).
async fn pushes_accepted(http: &reqwest::Client, base: &str, agent: &str) -> usize {
    let Ok(resp) = http.get(format!("{base}/metrics")).send().await else {
        return 0;
    };
    let text = resp.text().await.unwrap_or_default();
    let needle = format!(r#"agent="{agent}",result="accepted""#);
    text.lines()
        .filter(|l| l.starts_with("agui_gateway_push_received_total") && l.contains(&needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as usize
}

struct Settings {
    cell: Duration,
    grace: Duration,
    gap: Duration,
}

/// One row of the table.
struct Row {
    mode: Mode,
    reviewers: usize,
    per_minute: f64,
    by_method: Vec<(String, f64)>,
    pushes_per_minute: f64,
    first: Vec<f64>,
    last: Vec<f64>,
    made: usize,
    unseen: usize,
    untimed: usize,
}

/// One cell: `reviewers` reviewers of `mode` for [`Settings::cell`], changes made meanwhile.
async fn cell(
    mode: Mode,
    reviewers: usize,
    base: &str,
    agent_url: &str,
    proxy: &Counting,
    s: &Settings,
) -> Row {
    let http = reqwest::Client::new();
    let seen: Shared = Arc::default();
    let mut tasks = Vec::new();
    let reviewer = |index| Reviewer {
        http: http.clone(),
        base: base.to_owned(),
        mode,
        seen: seen.clone(),
        index,
        of: reviewers,
    };
    if mode == Mode::Polling {
        for r in 0..reviewers {
            tasks.push(tokio::spawn(reviewer(r).poll()));
        }
    } else {
        let (tx, mut rx) = tokio::sync::mpsc::channel(reviewers);
        for r in 0..reviewers {
            tasks.push(tokio::spawn(reviewer(r).follow(tx.clone())));
        }
        let mut open = 0;
        for _ in 0..reviewers {
            if rx.recv().await == Some(true) {
                open += 1;
            }
        }
        if open < reviewers {
            eprintln!("{}: only {open} of {reviewers} feeds opened", mode.name());
        }
    }
    let before = proxy.snapshot();
    let pushes_before = pushes_accepted(&http, base, mode.agent()).await;
    let started = Instant::now();
    let mut made = 0;
    let mut changes = Vec::new();
    while started.elapsed() + s.grace < s.cell {
        let (http, agent_url, base, seen) = (
            http.clone(),
            agent_url.to_owned(),
            base.to_owned(),
            seen.clone(),
        );
        changes.push(tokio::spawn(async move {
            make_change(&http, mode, &agent_url, &base, &seen).await;
        }));
        made += 1;
        tokio::time::sleep(s.gap).await;
    }
    tokio::time::sleep(s.cell.saturating_sub(started.elapsed())).await;
    let elapsed = started.elapsed().as_secs_f64();
    let after = proxy.snapshot();
    let pushes = pushes_accepted(&http, base, mode.agent()).await - pushes_before;
    for t in tasks.into_iter().chain(changes) {
        t.abort();
    }
    let per_min = |n: usize| n as f64 * 60.0 / elapsed;
    let mut by_method: Vec<(String, f64)> = after
        .iter()
        .map(|(k, n)| (k.clone(), per_min(n - before.get(k).copied().unwrap_or(0))))
        .filter(|(_, n)| *n > 0.0)
        .collect();
    by_method.sort_by(|a, b| b.1.total_cmp(&a.1));
    let all: usize = after.values().sum::<usize>() - before.values().sum::<usize>();
    let seen = seen.lock().unwrap();
    let (mut first, mut last, mut unseen) = (Vec::new(), Vec::new(), 0);
    for key in &seen.keys {
        let got: Vec<f64> = seen
            .latencies
            .get(key)
            .map(|v| v.iter().flatten().copied().collect())
            .unwrap_or_default();
        if got.is_empty() {
            unseen += 1;
            continue;
        }
        first.push(got.iter().copied().fold(f64::INFINITY, f64::min));
        if got.len() == reviewers {
            last.push(got.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        }
    }
    first.sort_by(f64::total_cmp);
    last.sort_by(f64::total_cmp);
    Row {
        mode,
        reviewers,
        per_minute: per_min(all),
        by_method,
        pushes_per_minute: per_min(pushes),
        first,
        last,
        made,
        unseen,
        untimed: seen.untimed,
    }
}

fn gateway_config(mode: Mode, port: u16, plain: &str, pushed: &str, poll_s: usize) -> Value {
    let poll_s = if mode == Mode::SharedPoll {
        poll_s
    } else {
        3600
    };
    let mut config = json!({
        "agents": [
            {"name": PLAIN, "url": plain, "visibility": "shared", "push": "off"},
            {"name": PUSHED, "url": pushed, "visibility": "shared"},
        ],
        "inbox": {"poll_s": poll_s, "max_subscribers_per_caller": 1000,
                  "max_subscribers": 1000},
    });
    if mode == Mode::Push {
        config["push"] = json!({"enabled": true, "public_url": format!("http://127.0.0.1:{port}")});
    }
    config
}

fn ms(sorted: &[f64], p: f64) -> String {
    if sorted.is_empty() {
        "n/a".to_owned()
    } else {
        format!("{:.0}", percentile(sorted, p) * 1000.0)
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let s = Settings {
        cell: Duration::from_secs(env_or("BENCH_INBOX_SECS", 18) as u64),
        grace: Duration::from_secs(env_or("BENCH_INBOX_GRACE_SECS", 5) as u64),
        gap: Duration::from_millis(env_or("BENCH_INBOX_GAP_MS", 1500) as u64),
    };
    let poll_s = env_or("BENCH_INBOX_POLL_S", 2);
    let reviewers: Vec<usize> = std::env::var("BENCH_INBOX_REVIEWERS")
        .unwrap_or_else(|_| "1,10,100".to_owned())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let load_before = load();
    let (_plain_agent, plain_url) = start_ref_agent(false);
    let (_push_agent, push_url) = start_ref_agent(true);
    let plain = Counting::start(&plain_url).await;
    let pushed = Counting::start(&push_url).await;
    let mut rows = Vec::new();
    for mode in [Mode::Polling, Mode::SharedPoll, Mode::Push] {
        let port = free_port();
        let config = gateway_config(mode, port, &plain.url, &pushed.url, poll_s);
        let _gateway = start_gateway(port, &config).await;
        let base = format!("http://127.0.0.1:{port}");
        // The first shared read of each agent (start-up) done before the window opens.
        let _ = reqwest::get(format!("{base}/threads")).await;
        let (agent_url, proxy) = if mode == Mode::Push {
            (&push_url, &pushed)
        } else {
            (&plain_url, &plain)
        };
        for &n in &reviewers {
            let row = cell(mode, n, &base, agent_url, proxy, &s).await;
            eprintln!("{} × {n}: done", mode.name());
            rows.push(row);
        }
    }
    print_table(&rows, &s, poll_s, &load_before);
}

fn print_table(rows: &[Row], s: &Settings, poll_s: usize, load_before: &str) {
    println!("| mode | reviewers | upstream requests/min | of which (per min) | pushes/min (agent → gateway) | change → first reviewer p50 / p99 ms | change → every reviewer p50 / p99 ms | changes seen / made |");
    println!("|---|---:|---:|---|---:|---:|---:|---:|");
    for r in rows {
        let of: Vec<String> = r
            .by_method
            .iter()
            .map(|(k, n)| format!("{k} {n:.0}"))
            .collect();
        println!(
            "| {} | {} | {:.0} | {} | {:.0} | {} / {} | {} / {} | {} / {}{} |",
            r.mode.name(),
            r.reviewers,
            r.per_minute,
            if of.is_empty() {
                "—".to_owned()
            } else {
                of.join(", ")
            },
            r.pushes_per_minute,
            ms(&r.first, 0.5),
            ms(&r.first, 0.99),
            ms(&r.last, 0.5),
            ms(&r.last, 0.99),
            r.made - r.unseen,
            r.made,
            if r.untimed > 0 {
                format!(" ({} without a status time)", r.untimed)
            } else {
                String::new()
            },
        );
    }
    println!();
    println!(
        "Notes: each cell {} s, one change every {} ms for its first {} s; today's console polls \
         every {} s per reviewer (phases spread evenly over the interval; that gateway's \
         `inbox.poll_s` 3600, so its shared poll makes no request in the window); the shared \
         poll's `inbox.poll_s` = {poll_s}. \
         Polling and shared poll: each change is a blocking A2A `SendMessage` \"approve\" sent \
         straight to the agent (no gateway run), the task entering input-required. Push: a run \
         of `slow 10` through the gateway whose stream is dropped after its first event (its \
         `SendStreamingMessage` and push registration are in the counts), the task completing \
         on its own 1 s later. Latency: from the task's status timestamp to the reviewer \
         holding the change. Upstream: the a2a-sdk 1.3.0 reference agent; requests counted by \
         a proxy in front of it. Load average before: {load_before}; after: {}.",
        s.cell.as_secs(),
        s.gap.as_millis(),
        s.cell.saturating_sub(s.grace).as_secs(),
        CONSOLE_POLL.as_secs(),
        load(),
    );
}
