//! Test peers for the end-to-end suite: the gateway (in-process, on 127.0.0.1:0), the real
//! A2A upstream (Python a2a-sdk 1.3.0, one process per protocol mode, shared by the tests),
//! and the real AG-UI client (`@ag-ui/client` 1.0.0 HttpAgent, one Node process per drive).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use agui_a2a_gateway::app;
use agui_a2a_gateway::config::{self, FileConfig, Overrides};
use serde_json::{json, Value};

use crate::ready_line::{read_ready, READY_WITHIN};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `path` (a test peer's install) exists; else the test fails saying how to install it.
pub fn require(path: &Path, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is missing at {}: run `bash scripts/test` (it installs the test peers)",
        path.display()
    );
    path.to_owned()
}

/// A running reference upstream: a shared one lives for the whole test binary
/// ([`upstream`]); a test's own ([`Upstream::start`]) until it is killed or dropped.
pub struct Upstream {
    pub url: String,
    child: Child,
}

impl Upstream {
    /// A reference upstream of the caller's own for `versions` (`both`, `1.0`, `0.3`), for a
    /// test that takes it down.
    pub fn start(versions: &str) -> Self {
        start_upstream(versions, &[])
    }

    /// Kills the upstream and waits until it is gone: nothing listens at its URL any more.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A URL where nothing listens (a port held by a socket that never listens).
/// A port free on 127.0.0.1 now (the OS's pick).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn closed_url() -> String {
    // A socket bound and never listening: connections are refused, and the port stays this
    // test process's (a port merely freed may be taken by the next peer started).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}/", socket.local_addr().unwrap());
    std::mem::forget(socket);
    url
}

/// Starts a test peer that prints `READY <base-url>` on stdout once it listens
/// (tests/e2e/ready_line.rs), told to exit with this process; its URL.
pub fn spawn_ready(cmd: &mut Command, what: &str) -> (Child, String) {
    let mut child = cmd
        .args(["--parent-pid", &std::process::id().to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let url = read_ready(child.stdout.take().unwrap(), READY_WITHIN).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("{what} printed no READY within {READY_WITHIN:?} (its stderr is above)")
    });
    (child, url)
}

fn start_upstream(versions: &str, extra: &[&str]) -> Upstream {
    let python = require(&root().join(".venv/bin/python"), "the Python venv");
    let mut cmd = Command::new(python);
    cmd.arg(root().join("tests/upstream/ref_agent.py"))
        .args(["--versions", versions])
        .args(extra);
    let (child, url) = spawn_ready(&mut cmd, "the reference upstream");
    Upstream { url, child }
}

/// The shared upstream for `versions` (`both`, `1.0`, `0.3`, or `rest`: HTTP+JSON only,
/// under [`REST_PREFIX`] with tenant [`REST_TENANT`]).
pub fn upstream(versions: &'static str) -> &'static str {
    static BOTH: OnceLock<Upstream> = OnceLock::new();
    static V1: OnceLock<Upstream> = OnceLock::new();
    static V03: OnceLock<Upstream> = OnceLock::new();
    static REST: OnceLock<Upstream> = OnceLock::new();
    static GRPC: OnceLock<Upstream> = OnceLock::new();
    let cell = match versions {
        "both" => &BOTH,
        "1.0" => &V1,
        "0.3" => &V03,
        "rest" => &REST,
        "grpc" => &GRPC,
        other => panic!("no upstream mode {other}"),
    };
    &cell.get_or_init(|| start_upstream(versions, &[])).url
}

/// The shared upstream for `versions` (`both`, `0.3`) whose card declares the gateway's
/// forwarding-lane extensions (`--declare-lane`).
pub fn lane_upstream(versions: &'static str) -> &'static str {
    static BOTH: OnceLock<Upstream> = OnceLock::new();
    static V03: OnceLock<Upstream> = OnceLock::new();
    let cell = match versions {
        "both" => &BOTH,
        "0.3" => &V03,
        other => panic!("no lane upstream mode {other}"),
    };
    &cell
        .get_or_init(|| start_upstream(versions, &["--declare-lane"]))
        .url
}

/// Where the `rest` upstream's HTTP+JSON interface lives (tests/upstream/ref_agent.py).
pub const REST_PREFIX: &str = "v1beta1/projects/demo/locations/local/reasoningEngines/ref/a2a";
/// The `rest` upstream's tenant: its routes answer only under it.
pub const REST_TENANT: &str = "acme";

/// A gateway on 127.0.0.1:0 serving until the test's runtime ends.
pub struct Gateway {
    pub base: String,
}

impl Gateway {
    /// Starts a gateway from a YAML config (agents etc.), optionally with `--demo`.
    pub async fn start(yaml: &str, demo: bool) -> Self {
        Self::start_until(yaml, demo, std::future::pending())
            .await
            .0
    }

    /// Like [`Gateway::start`], serving until `shutdown` resolves; also returns the server task.
    pub async fn start_until(
        yaml: &str,
        demo: bool,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> (Self, tokio::task::JoinHandle<std::io::Result<()>>) {
        let file: FileConfig = serde_yaml_ng::from_str(yaml).expect("test config");
        let settings = config::settings(
            file,
            Overrides {
                listen: Some("127.0.0.1:0".into()),
                demo,
                ..Default::default()
            },
        )
        .expect("valid settings");
        let app = app::build(settings).await.expect("build");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(app.serve(listener, shutdown));
        (Self { base }, server)
    }

    /// A gateway serving on `listener`, whose address the config may name (`push.public_url`).
    pub async fn start_on(yaml: &str, listener: tokio::net::TcpListener) -> Self {
        let file: FileConfig = serde_yaml_ng::from_str(yaml).expect("test config");
        let overrides = Overrides {
            listen: Some("127.0.0.1:0".into()),
            ..Default::default()
        };
        let settings = config::settings(file, overrides).expect("valid settings");
        let app = app::build(settings).await.expect("build");
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(app.serve(listener, std::future::pending()));
        Self { base }
    }

    /// A gateway with agents `NAME=URL`.
    pub async fn with_agents(agents: &[(&str, &str)]) -> Self {
        let list: Vec<Value> = agents
            .iter()
            .map(|(n, u)| json!({"name": n, "url": u}))
            .collect();
        Self::start(&json!({ "agents": list }).to_string(), false).await
    }

    pub fn agent_url(&self, name: &str) -> String {
        format!("{}/agents/{name}", self.base)
    }
}

/// `GET url` as JSON (the gateway's `/readyz`, `/agents/{name}`, ...).
pub async fn get_json(url: impl reqwest::IntoUrl) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

/// Runs the HttpAgent driver; returns its per-step results.
pub async fn drive(url: &str, thread_id: &str, steps: Value) -> Vec<Value> {
    drive_with(json!({"url": url, "threadId": thread_id, "steps": steps})).await
}

/// The protocol modes of the reference upstream: 1.0 + 0.3, 1.0 only, 0.3 only.
pub const MODES: [&str; 3] = ["both", "1.0", "0.3"];

/// For each upstream mode: a gateway with agent `ref` on that upstream, driven on thread
/// `<thread>-<mode>` with `steps`. Returns `(mode, steps)` per mode, in [`MODES`] order.
pub async fn drive_each_mode(thread: &str, steps: Value) -> Vec<(&'static str, Vec<Value>)> {
    let mut out = Vec::new();
    for mode in MODES {
        let gw = Gateway::with_agents(&[("ref", upstream(mode))]).await;
        let driven = drive(
            &gw.agent_url("ref"),
            &format!("{thread}-{mode}"),
            steps.clone(),
        )
        .await;
        out.push((mode, driven));
    }
    out
}

/// One run of one user message through HttpAgent; asserts the client accepted it and returns
/// its step.
pub async fn drive_message(url: &str, thread: &str, text: &str) -> Value {
    let mut steps = drive(url, thread, json!([{ "message": text }])).await;
    let step = steps.remove(0);
    assert_accepted(&step);
    step
}

/// `body` with the top-level members of `extra` set (state, forwardedProps, resume, …).
pub fn with(mut body: Value, extra: &Value) -> Value {
    for (k, v) in extra.as_object().expect("an object") {
        body[k] = v.clone();
    }
    body
}

/// POSTs a run body as the caller with API key `key`.
pub async fn post_as(url: &str, key: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// A plain A2A 0.3 `message/send` (no A2A-Version header), as any A2A client sends it;
/// asserts the task completed and returns the JSON-RPC reply.
pub async fn a2a_send(url: &str, message_id: &str, context_id: &str, text: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": "1", "method": "message/send", "params": {"message": {
        "role": "user", "messageId": message_id, "contextId": context_id,
        "parts": [{"kind": "text", "text": text}]}}});
    let reply: Value = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["result"]["status"]["state"], "completed", "{reply}");
    reply
}

/// A task read straight from the `rest` upstream over HTTP+JSON, bypassing the gateway.
pub async fn rest_get_task(url: &str, task_id: &str) -> Value {
    let task: Value = reqwest::Client::new()
        .get(format!("{url}{REST_PREFIX}/{REST_TENANT}/tasks/{task_id}"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(task["status"].is_object(), "GET tasks/{task_id}: {task}");
    task
}

/// A task read straight from an upstream, bypassing the gateway: `GetTask` (with
/// `A2A-Version: 1.0`) or, for `protocol` "0.3", `tasks/get`.
pub async fn upstream_get_task(url: &str, protocol: &str, task_id: &str) -> Value {
    let mut req = reqwest::Client::new().post(url);
    let method = if protocol == "0.3" {
        "tasks/get"
    } else {
        req = req.header("A2A-Version", "1.0");
        "GetTask"
    };
    let reply: Value = req
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": task_id}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = if reply["result"]["task"].is_object() {
        &reply["result"]["task"]
    } else {
        &reply["result"]
    };
    assert!(task["status"].is_object(), "{method} {task_id}: {reply}");
    task.clone()
}

/// How often [`wait_until`] looks again.
const POLL: std::time::Duration = std::time::Duration::from_millis(25);

/// Waits for a condition, not for a time: runs `check` every [`POLL`] until it gives `Ok`,
/// and returns that; panics naming `what` and the last thing `check` saw (its `Err`) once
/// `within` has passed without it. For tests about order ("once the task runs, connect"),
/// where a fixed sleep is a guess: too long on a fast machine, too short on a loaded one.
pub async fn wait_until<T>(
    what: &str,
    within: std::time::Duration,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let started = std::time::Instant::now();
    loop {
        let seen = match check().await {
            Ok(found) => return found,
            Err(seen) => seen,
        };
        assert!(
            started.elapsed() < within,
            "waited {within:?} until {what}, in vain; last seen: {seen}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the gateway's `/readyz?strict` answers 200 (its agents' cards are read in
/// the background after it starts; plain `/readyz` is 200 before).
pub async fn wait_ready(gw: &Gateway) {
    wait_until(
        "the gateway is ready",
        std::time::Duration::from_secs(5),
        async || {
            let ready = reqwest::get(format!("{}/readyz?strict", gw.base))
                .await
                .unwrap();
            match ready.status().as_u16() {
                200 => Ok(()),
                status => Err(format!("/readyz {status}: {}", ready.text().await.unwrap())),
            }
        },
    )
    .await;
}

/// The gateway's `/metrics` text (open without a key when inbound auth is off).
pub async fn metrics_text(gw: &Gateway) -> String {
    let resp = reqwest::get(format!("{}/metrics", gw.base)).await.unwrap();
    assert_eq!(resp.status(), 200, "GET /metrics");
    resp.text().await.unwrap()
}

/// The sum of `metric`'s series whose labels contain `label` (`""`: every series, or the
/// one of a metric without labels).
pub async fn metric_sum(gw: &Gateway, metric: &str, label: &str) -> u64 {
    let of_metric = |l: &str| {
        l.strip_prefix(metric)
            .is_some_and(|r| r.starts_with(['{', ' ']))
    };
    metrics_text(gw)
        .await
        .lines()
        .filter(|l| of_metric(l) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// `agui_gateway_open_streams` of `agent`: the gateway's run streams open now, read from
/// its `/metrics`.
pub async fn open_streams(gw: &Gateway, agent: &str) -> u64 {
    let text = metrics_text(gw).await;
    let series = format!("agui_gateway_open_streams{{agent=\"{agent}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{series}` in /metrics:\n{text}"))
}

/// The status the threads API gives the caller's thread `thread` of `agent` (`working`,
/// `idle`, `input-required`, ...), `None` while the gateway does not know the thread yet.
pub async fn thread_status(gw: &Gateway, agent: &str, thread: &str) -> Option<String> {
    let resp = reqwest::get(format!("{}/threads/{thread}", gw.agent_url(agent)))
        .await
        .unwrap();
    if resp.status() == 404 {
        return None;
    }
    assert_eq!(resp.status(), 200, "GET the thread {thread}");
    let detail: Value = resp.json().await.unwrap();
    Some(
        detail["status"]
            .as_str()
            .expect("a thread status")
            .to_owned(),
    )
}

/// The client's activity message (interrupts), if any.
pub fn activity(step: &Value) -> &Value {
    step["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "activity")
        .expect("an activity message")
}

pub async fn drive_with(script: Value) -> Vec<Value> {
    node_steps("tests/client", "@ag-ui/client", "drive.mjs", script).await
}

/// One run read raw in AG-UI's protobuf encoding, each frame decoded by `@ag-ui/proto`'s
/// own decoder (tests/client/decode.mjs): `{status, contentType, events, trailingBytes,
/// error}`.
pub async fn decode_protobuf(script: Value) -> Value {
    node_steps("tests/client", "@ag-ui/proto", "decode.mjs", script)
        .await
        .remove(0)
}

/// CopilotKit's own client (`@copilotkitnext/core`, tests/copilotkit/session.mjs) running
/// `script`'s steps: what its agent held and saw after each.
pub async fn copilotkit_session(script: Value) -> Vec<Value> {
    node_steps(
        "tests/copilotkit",
        "@copilotkitnext/core",
        "session.mjs",
        script,
    )
    .await
}

/// Runs a Node driver of `dir` (whose `package` must be installed) on `script`: the
/// `steps` of the JSON object it prints.
async fn node_steps(dir: &str, package: &str, driver: &str, script: Value) -> Vec<Value> {
    let dir = root().join(dir);
    require(&dir.join("node_modules").join(package), package);
    let out = tokio::process::Command::new("node")
        .arg(dir.join(driver))
        .arg(script.to_string())
        .output()
        .await
        .expect("run node");
    assert!(
        out.status.success(),
        "{driver} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{driver} output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    v["steps"].as_array().unwrap().clone()
}

/// The client accepted every event: no failure, no pipeline warning, no stripped field,
/// no state patch that failed to apply.
pub fn assert_accepted(step: &Value) {
    assert!(
        step["failed"].is_null(),
        "run failed in the client: {}",
        step["failed"]
    );
    let warnings = step["warnings"].as_array().unwrap();
    assert!(warnings.is_empty(), "client warnings: {warnings:?}");
    let types = event_types(step);
    assert_eq!(
        types.first().map(String::as_str),
        Some("RUN_STARTED"),
        "{types:?}"
    );
}

pub fn event_types(step: &Value) -> Vec<String> {
    step["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

pub fn last_event(step: &Value) -> &Value {
    step["events"].as_array().unwrap().last().unwrap()
}

/// `(role, content)` of the client's messages, activity messages left out; content trimmed
/// (token chunks joined into one reply keep the spacing the agent streamed).
pub fn transcript(step: &Value) -> Vec<(String, String)> {
    step["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "activity")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().trim().to_owned(),
            )
        })
        .collect()
}

pub fn assistant_texts(step: &Value) -> Vec<String> {
    transcript(step)
        .into_iter()
        .filter(|(r, _)| r == "assistant")
        .map(|(_, c)| c)
        .collect()
}

// Helpers for the hardening tests (hostile upstreams, abusive clients).

/// A RunAgentInput with one user message `text`; the run and message ids derive from
/// `thread`. Add `state`, `forwardedProps` etc. by indexing the returned value.
pub fn run_input(thread: &str, text: &str) -> Value {
    json!({
        "threadId": thread,
        "runId": format!("{thread}-run"),
        "messages": [{"id": format!("{thread}-user"), "role": "user", "content": text}],
    })
}

/// One request to a run route, read to its end with reqwest.
pub struct SseRun {
    pub status: u16,
    /// The whole body as received (the SSE stream, or a JSON error).
    pub raw: String,
    /// The `data:` payloads of the SSE stream, parsed.
    pub events: Vec<Value>,
    /// From sending the request to the end of the body.
    pub elapsed: std::time::Duration,
    /// A transport error that ended the body early, if any.
    pub cut: Option<String>,
}

impl SseRun {
    /// The body as JSON (for the errors answered before a stream starts).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.raw).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.raw))
    }

    pub fn types(&self) -> Vec<&str> {
        self.events
            .iter()
            .map(|e| e["type"].as_str().unwrap_or("?"))
            .collect()
    }
}

/// POSTs `body` to `url` and reads the whole answer; panics (with what arrived so far) if
/// it has not ended within `within`.
pub async fn post_run(url: &str, body: &Value, within: std::time::Duration) -> SseRun {
    let started = std::time::Instant::now();
    let mut raw = Vec::new();
    let mut status = 0;
    let mut cut = None;
    let read = async {
        let mut resp = reqwest::Client::new()
            .post(url)
            .json(body)
            .send()
            .await
            .expect("send the run request");
        status = resp.status().as_u16();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => raw.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => {
                    cut = Some(e.to_string());
                    break;
                }
            }
        }
    };
    let ended = tokio::time::timeout(within, read).await.is_ok();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    assert!(
        ended,
        "the run did not end within {within:?} (status {status}); last bytes: {}",
        tail(&raw, 600)
    );
    let events = sse_events(&raw);
    SseRun {
        status,
        raw,
        events,
        elapsed: started.elapsed(),
        cut,
    }
}

/// The last `n` bytes of `s` (on a char boundary), for failure messages.
pub fn tail(s: &str, n: usize) -> &str {
    let mut at = s.len().saturating_sub(n);
    while !s.is_char_boundary(at) {
        at += 1;
    }
    &s[at..]
}

/// The JSON payloads of an SSE body (`data:` lines of each frame joined by newlines).
pub fn sse_events(raw: &str) -> Vec<Value> {
    raw.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|frame| {
            let data: Vec<&str> = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| {
                serde_json::from_str(&data.join("\n"))
                    .unwrap_or_else(|e| panic!("an SSE frame is not JSON ({e}): {frame:.300}"))
            })
        })
        .collect()
}

/// The run was a `200` stream that started with `RUN_STARTED` and ended in exactly one
/// terminal event, a `RUN_ERROR` with `code`; returns that event.
pub fn assert_run_error(run: &SseRun, code: &str) -> Value {
    assert_eq!(run.status, 200, "{}", tail(&run.raw, 600));
    assert!(run.cut.is_none(), "the stream was cut: {:?}", run.cut);
    let types = run.types();
    assert_eq!(types.first(), Some(&"RUN_STARTED"), "{types:?}");
    let terminals = types
        .iter()
        .filter(|t| matches!(**t, "RUN_FINISHED" | "RUN_ERROR"))
        .count();
    let last = run.events.last().unwrap();
    assert_eq!(
        (terminals, last["type"].as_str()),
        (1, Some("RUN_ERROR")),
        "one terminal event, a RUN_ERROR, last: {}",
        tail(&run.raw, 600)
    );
    assert_eq!(last["code"], code, "RUN_ERROR: {last}");
    last.clone()
}

/// The run was a `200` stream that finished successfully.
pub fn assert_run_finished(run: &SseRun) {
    assert_eq!(run.status, 200, "{}", tail(&run.raw, 600));
    let last = run.events.last().expect("events");
    assert_eq!(last["type"], "RUN_FINISHED", "{}", tail(&run.raw, 600));
    assert_eq!(run.types().first(), Some(&"RUN_STARTED"));
}

/// The gateway (started with `--demo`) still serves a normal run, through the real client.
pub async fn assert_serves(gw: &Gateway, thread: &str) {
    let steps = drive(
        &gw.agent_url("demo"),
        thread,
        json!([{"message": "echo still serving"}]),
    )
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(last_event(&steps[0])["outcome"]["type"], "success");
    assert_eq!(
        assistant_texts(&steps[0]).last().map(String::as_str),
        Some("still serving")
    );
}

/// The report a Node driver printed: its last line that is JSON; panics with all it wrote
/// when there is none.
pub fn driver_report(out: &std::process::Output, driver: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no report from {driver}: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}
