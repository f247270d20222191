//! The operations surface end to end (docs/design.md#3-http-surface,
//! docs/design.md#10-observability, docs/design.md#11-security): `/metrics` read with
//! prometheus-client's own parser, OTLP/HTTP traces caught by a local receiver, per-caller
//! rate limits, and `/openapi.json` checked against the live gateway by schemathesis. The
//! Python tools live in `tests/ops/` (their venv, `tests/ops/.venv`, from
//! `tests/ops/requirements.lock`, is installed by `scripts/test`).
//!
//! Every test starts its own gateway, so counters read from `/metrics` count exactly what
//! that test did.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake::{task, update, Answer, Fake};
use crate::support::*;

// ---------------------------------------------------------------------------------------
// The Python tools of tests/ops/.

fn ops_python() -> PathBuf {
    let python = root().join("tests/ops/.venv/bin/python");
    assert!(
        python.exists(),
        "the ops venv is missing at {}: run `bash scripts/test` (or `python3 -m venv \
         tests/ops/.venv && tests/ops/.venv/bin/pip install -r tests/ops/requirements.lock`)",
        python.display()
    );
    python
}

/// One parsed metric family, as `tests/ops/parse_metrics.py` prints it.
#[derive(Debug)]
struct Family {
    name: String,
    kind: String,
    samples: Vec<Sample>,
}

#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A `/metrics` scrape, parsed by prometheus-client (Python).
#[derive(Debug)]
struct Metrics {
    families: Vec<Family>,
    raw: String,
}

impl Metrics {
    /// The family of metric `name` as the contract names it (`..._total` for counters:
    /// prometheus-client's parser names a counter family without `_total`, its samples
    /// with it). Asserts its type.
    fn family(&self, name: &str, kind: &str) -> &Family {
        let family_name = if kind == "counter" {
            name.strip_suffix("_total").unwrap_or(name)
        } else {
            name
        };
        let family = self
            .families
            .iter()
            .find(|f| f.name == family_name)
            .unwrap_or_else(|| {
                panic!(
                    "no metric family {family_name} ({name}); families: {:?}\n{}",
                    self.families
                        .iter()
                        .map(|f| format!("{}:{}", f.name, f.kind))
                        .collect::<Vec<_>>(),
                    tail(&self.raw, 3000)
                )
            });
        assert_eq!(
            family.kind, kind,
            "{name} is typed {:?}, expected {kind} (a TYPE line naming another metric than \
             its samples, e.g. an OpenMetrics body served as text/plain?)",
            family.kind
        );
        // No sample of the metric may have landed in another (untyped) family.
        let strays: Vec<&str> = self
            .families
            .iter()
            .filter(|f| f.name != family_name)
            .flat_map(|f| &f.samples)
            .filter(|s| s.name == name || s.name.starts_with(&format!("{family_name}_")))
            .map(|s| s.name.as_str())
            .collect();
        assert!(
            strays.is_empty(),
            "samples of {name} outside its family: {strays:?}"
        );
        family
    }

    /// The samples named `sample` (e.g. `agui_gateway_runs_total`, `..._count`).
    fn samples(&self, sample: &str) -> Vec<&Sample> {
        self.families
            .iter()
            .flat_map(|f| &f.samples)
            .filter(|s| s.name == sample)
            .collect()
    }

    /// The value of the one sample `sample` whose labels include `labels`, 0 if none.
    fn value(&self, sample: &str, labels: &[(&str, &str)]) -> f64 {
        let found: Vec<&Sample> = self
            .samples(sample)
            .into_iter()
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect();
        assert!(
            found.len() <= 1,
            "{sample}{labels:?} matches several samples: {found:?}"
        );
        found.first().map_or(0.0, |s| s.value)
    }

    /// Every label value of every sample.
    fn label_values(&self) -> Vec<(&str, &str, &str)> {
        self.families
            .iter()
            .flat_map(|f| &f.samples)
            .flat_map(|s| {
                s.labels
                    .iter()
                    .map(move |(k, v)| (s.name.as_str(), k.as_str(), v.as_str()))
            })
            .collect()
    }
}

/// Parses a Prometheus text exposition with `tests/ops/parse_metrics.py`
/// (`--openmetrics` when served as OpenMetrics); a parse error fails the test.
async fn parse_metrics(text: &str, openmetrics: bool) -> Vec<Family> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new(ops_python());
    cmd.arg(root().join("tests/ops/parse_metrics.py"));
    if openmetrics {
        cmd.arg("--openmetrics");
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start parse_metrics.py");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "prometheus-client cannot parse /metrics: {}\n--- the exposition:\n{}",
        String::from_utf8_lossy(&out.stderr),
        tail(text, 3000)
    );
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    parsed
        .as_array()
        .unwrap()
        .iter()
        .map(|f| Family {
            name: f["name"].as_str().unwrap().to_owned(),
            kind: f["type"].as_str().unwrap().to_owned(),
            samples: f["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| Sample {
                    name: s["name"].as_str().unwrap().to_owned(),
                    labels: s["labels"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                        .collect(),
                    value: match &s["value"] {
                        Value::String(s) if s == "+Inf" => f64::INFINITY,
                        Value::String(s) if s == "-Inf" => f64::NEG_INFINITY,
                        Value::String(_) => f64::NAN,
                        v => v.as_f64().unwrap(),
                    },
                })
                .collect(),
        })
        .collect()
}

/// `GET /metrics` (as `key`'s caller, if any).
async fn get_metrics(gw: &Gateway, key: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new().get(format!("{}/metrics", gw.base));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    req.send().await.unwrap()
}

/// Scrapes and parses `/metrics`; asserts a 200 in a Prometheus content type.
async fn scrape(gw: &Gateway, key: Option<&str>) -> Metrics {
    let resp = get_metrics(gw, key).await;
    assert_eq!(resp.status(), 200, "GET /metrics");
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let openmetrics = content_type.starts_with("application/openmetrics-text");
    assert!(
        openmetrics || content_type.starts_with("text/plain"),
        "/metrics content type: {content_type:?}"
    );
    let raw = resp.text().await.unwrap();
    let families = parse_metrics(&raw, openmetrics).await;
    Metrics { families, raw }
}

/// The OTLP/HTTP receiver of `tests/ops/otlp_receiver.py`; killed when dropped.
struct Receiver {
    url: String,
    child: Child,
}

impl Receiver {
    fn start() -> Self {
        let mut cmd = Command::new(ops_python());
        cmd.arg(root().join("tests/ops/otlp_receiver.py"))
            .args(["--port", "0"]);
        let (child, url) = spawn_ready(&mut cmd, "the OTLP receiver");
        let url = url.trim_end_matches('/').to_owned();
        Self { url, child }
    }

    async fn spans(&self) -> Vec<Value> {
        reqwest::get(format!("{}/spans", self.url))
            .await
            .unwrap()
            .json::<Vec<Value>>()
            .await
            .unwrap()
    }

    /// Polls the received spans (exported in batches) until `done` holds, for up to 15 s;
    /// returns the last set seen either way.
    async fn spans_until(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let spans = self.spans().await;
            if done(&spans) || Instant::now() > deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// Runs.

/// A RunAgentInput of the 1.0 protocol (so RUN_FINISHED carries its outcome).
fn run_body(thread: &str, run: &str, text: &str) -> Value {
    json!({
        "threadId": thread, "runId": run, "protocolVersion": "1.0",
        "messages": [{"id": format!("{run}-user"), "role": "user", "content": text}],
    })
}

/// The outcome a client saw: `success`, `interrupt`, `cancelled` (RUN_FINISHED.outcome.type)
/// or `error` (RUN_ERROR).
fn outcome(run: &SseRun) -> String {
    let last = run.events.last().expect("events");
    match last["type"].as_str() {
        Some("RUN_ERROR") => "error".into(),
        Some("RUN_FINISHED") => last["outcome"]["type"]
            .as_str()
            .unwrap_or("success")
            .to_owned(),
        other => panic!("not a terminal event: {other:?}: {}", tail(&run.raw, 600)),
    }
}

/// Every id a run carried (thread, run, message, context and task ids), for the check that
/// none of them ends up in a metric label.
fn ids_of(body: &Value, run: &SseRun, into: &mut BTreeSet<String>) {
    for key in ["threadId", "runId"] {
        into.insert(body[key].as_str().unwrap().to_owned());
    }
    for m in body["messages"].as_array().unwrap() {
        into.insert(m["id"].as_str().unwrap().to_owned());
    }
    for e in &run.events {
        let a2a = &e["metadata"]["a2a"];
        for key in ["contextId", "taskId"] {
            if let Some(id) = a2a[key].as_str() {
                into.insert(id.to_owned());
            }
        }
        if let Some(id) = e["messageId"].as_str() {
            into.insert(id.to_owned());
        }
    }
}

const WITHIN: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// Metrics.

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_every_run_by_outcome_without_ids_in_labels() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let url = gw.agent_url("ref");
    let mut ids = BTreeSet::new();
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut events_sent = 0usize;
    let mut record = |body: &Value, run: &SseRun, expected: &str| {
        assert_eq!(run.status, 200, "{}", tail(&run.raw, 600));
        assert_eq!(outcome(run), expected, "{}", tail(&run.raw, 600));
        ids_of(body, run, &mut ids);
        *seen.entry(expected.to_owned()).or_default() += 1;
        events_sent += run.events.len();
    };
    // 3 successes, 2 interrupts (one then cancelled), 1 cancelled, 2 errors.
    for i in 0..3 {
        let body = run_body(
            &format!("metrics-ok-{i}"),
            &format!("metrics-ok-run-{i}"),
            "echo hi",
        );
        let run = post_run(&url, &body, WITHIN).await;
        record(&body, &run, "success");
    }
    let mut interrupt_ids = Vec::new();
    for i in 0..2 {
        let body = run_body(
            &format!("metrics-hitl-{i}"),
            &format!("metrics-hitl-run-{i}"),
            "approve",
        );
        let run = post_run(&url, &body, WITHIN).await;
        record(&body, &run, "interrupt");
        let interrupt = run.events.last().unwrap()["outcome"]["interrupts"][0]["id"]
            .as_str()
            .expect("an interrupt id")
            .to_owned();
        interrupt_ids.push(interrupt);
    }
    let cancel = json!({
        "threadId": "metrics-hitl-0", "runId": "metrics-hitl-cancel", "protocolVersion": "1.0",
        "messages": [], "resume": [{"interruptId": &interrupt_ids[0], "status": "cancelled"}],
    });
    let run = post_run(&url, &cancel, WITHIN).await;
    record(&cancel, &run, "cancelled");
    for (text, code) in [("fail", "a2a_task_failed"), ("crash", "a2a_error_-32603")] {
        let body = run_body(
            &format!("metrics-{text}"),
            &format!("metrics-{text}-run"),
            text,
        );
        let run = post_run(&url, &body, WITHIN).await;
        assert_eq!(run.events.last().unwrap()["code"], code);
        record(&body, &run, "error");
    }
    ids.extend(interrupt_ids);
    assert_eq!(
        seen,
        BTreeMap::from([
            ("success".into(), 3),
            ("interrupt".into(), 2),
            ("cancelled".into(), 1),
            ("error".into(), 2)
        ])
    );

    // Streams are closed once the bodies ended; allow the gauge a moment.
    let mut m = scrape(&gw, None).await;
    for _ in 0..20 {
        if m.value("agui_gateway_open_streams", &[("agent", "ref")]) == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        m = scrape(&gw, None).await;
    }

    // Every family, its type and its label set.
    let families: [(&str, &str, &[&str]); 9] = [
        ("agui_gateway_runs_total", "counter", &["agent", "outcome"]),
        (
            "agui_gateway_run_errors_total",
            "counter",
            &["agent", "code"],
        ),
        ("agui_gateway_open_streams", "gauge", &["agent"]),
        (
            "agui_gateway_upstream_requests_total",
            "counter",
            &["agent", "method", "binding", "result"],
        ),
        (
            "agui_gateway_time_to_first_event_seconds",
            "histogram",
            &["agent"],
        ),
        ("agui_gateway_run_duration_seconds", "histogram", &["agent"]),
        ("agui_gateway_events_total", "counter", &["agent"]),
        ("agui_gateway_rate_limited_total", "counter", &[]),
        (
            "agui_gateway_binding_store_errors_total",
            "counter",
            &["kind"],
        ),
    ];
    for (name, kind, labels) in families {
        let family = m.family(name, kind);
        for s in &family.samples {
            let mut keys: BTreeSet<&str> = s.labels.keys().map(String::as_str).collect();
            if s.name.ends_with("_bucket") {
                assert!(keys.remove("le"), "{s:?}");
            }
            let expected: BTreeSet<&str> = labels.iter().copied().collect();
            assert_eq!(keys, expected, "labels of {}", s.name);
        }
    }

    // runs_total counts exactly what this test did, under the agent's name.
    for (outcome, n) in &seen {
        assert_eq!(
            m.value(
                "agui_gateway_runs_total",
                &[("agent", "ref"), ("outcome", outcome)]
            ),
            f64::from(*n),
            "runs_total{{outcome={outcome}}}"
        );
    }
    let runs: f64 = m
        .samples("agui_gateway_runs_total")
        .iter()
        .map(|s| s.value)
        .sum();
    assert_eq!(runs, 8.0, "no run counted twice or under another outcome");
    for s in m.samples("agui_gateway_runs_total") {
        assert!(
            ["success", "interrupt", "cancelled", "error"].contains(&s.labels["outcome"].as_str()),
            "{s:?}"
        );
        assert_eq!(s.labels["agent"], "ref");
    }
    // One run error per code.
    for code in ["a2a_task_failed", "a2a_error_-32603"] {
        assert_eq!(
            m.value(
                "agui_gateway_run_errors_total",
                &[("agent", "ref"), ("code", code)]
            ),
            1.0,
            "run_errors_total{{code={code}}}"
        );
    }
    let errors: f64 = m
        .samples("agui_gateway_run_errors_total")
        .iter()
        .map(|s| s.value)
        .sum();
    assert_eq!(errors, 2.0);

    // Histograms: one observation per run for the duration; first events for some runs.
    for (name, min, max) in [
        ("agui_gateway_run_duration_seconds", 8.0, 8.0),
        ("agui_gateway_time_to_first_event_seconds", 1.0, 8.0),
    ] {
        let count = m.value(&format!("{name}_count"), &[("agent", "ref")]);
        assert!(
            (min..=max).contains(&count),
            "{name}_count = {count}, expected {min}..={max}"
        );
        let sum = m.value(&format!("{name}_sum"), &[("agent", "ref")]);
        assert!(sum >= 0.0 && sum < 60.0 * count, "{name}_sum = {sum}");
        let mut buckets: Vec<(f64, f64)> = m
            .samples(&format!("{name}_bucket"))
            .iter()
            .filter(|s| s.labels["agent"] == "ref")
            .map(|s| {
                let le = &s.labels["le"];
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                (le, s.value)
            })
            .collect();
        buckets.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        assert!(buckets.len() >= 2, "{name}: buckets {buckets:?}");
        assert_eq!(buckets.last().unwrap(), &(f64::INFINITY, count), "{name}");
        assert!(
            buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "{name}: {buckets:?}"
        );
    }

    // Upstream calls by JSON-RPC method as sent (the upstream speaks 1.0 here).
    let sends = m.value(
        "agui_gateway_upstream_requests_total",
        &[
            ("agent", "ref"),
            ("method", "SendStreamingMessage"),
            ("result", "ok"),
        ],
    );
    assert!(sends >= 6.0, "SendStreamingMessage ok = {sends}\n{}", m.raw);
    let failed: f64 = m
        .samples("agui_gateway_upstream_requests_total")
        .iter()
        .filter(|s| s.labels["result"] == "error")
        .map(|s| s.value)
        .sum();
    assert!(
        failed >= 1.0,
        "the crash is a failed upstream call\n{}",
        m.raw
    );
    for s in m.samples("agui_gateway_upstream_requests_total") {
        assert!(
            ["ok", "error"].contains(&s.labels["result"].as_str()),
            "{s:?}"
        );
        assert_eq!(s.labels["agent"], "ref");
    }

    // Events: exactly the AG-UI events the client received.
    assert_eq!(
        m.value("agui_gateway_events_total", &[("agent", "ref")]),
        events_sent as f64,
        "events_total"
    );
    assert_eq!(
        m.value("agui_gateway_open_streams", &[("agent", "ref")]),
        0.0
    );
    // The unlabeled counter is exposed, at 0 here; the store's errors, one series a kind
    // (docs/operations.md#managed-redis), every one at 0.
    let samples = m.samples("agui_gateway_rate_limited_total");
    assert_eq!(
        samples.len(),
        1,
        "agui_gateway_rate_limited_total is exposed (at 0)"
    );
    assert_eq!(samples[0].value, 0.0);
    let store = m.samples("agui_gateway_binding_store_errors_total");
    let kinds: BTreeSet<&str> = store.iter().map(|s| s.labels["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "auth",
            "cluster",
            "connection",
            "sentinel",
            "server",
            "skipped",
            "timeout",
            "tls"
        ]),
        "every kind is exposed"
    );
    assert!(store.iter().all(|s| s.value == 0.0), "{store:?}");

    // No label carries a thread, run, message, context, task or interrupt id.
    assert!(ids.len() > 20, "{ids:?}");
    for (sample, key, value) in m.label_values() {
        for id in &ids {
            assert!(
                !value.contains(id.as_str()),
                "{sample}{{{key}={value:?}}} carries the id {id:?}"
            );
        }
    }
}

const KEY: &str = "ops-metrics-key-0123456789";

#[tokio::test(flavor = "multi_thread")]
async fn metrics_need_a_key_when_auth_is_on_unless_public() {
    let auth = json!({"api_keys": [{"name": "ops", "key": KEY}]});
    let gw = Gateway::start(&json!({ "auth": auth }).to_string(), true).await;
    let resp = get_metrics(&gw, None).await;
    assert_eq!(resp.status(), 401, "GET /metrics without a key");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    assert_eq!(
        get_metrics(&gw, Some("not-the-key-0123456789"))
            .await
            .status(),
        401,
        "GET /metrics with a wrong key"
    );
    let m = scrape(&gw, Some(KEY)).await;
    m.family("agui_gateway_runs_total", "counter");

    let public = json!({ "auth": auth, "metrics_public": true });
    let gw = Gateway::start(&public.to_string(), true).await;
    let m = scrape(&gw, None).await;
    m.family("agui_gateway_open_streams", "gauge");
    // Only /metrics is public.
    let agents = reqwest::get(format!("{}/agents", gw.base)).await.unwrap();
    assert_eq!(
        agents.status(),
        401,
        "GET /agents without a key, metrics_public"
    );
    let run = post_run(&gw.agent_url("demo"), &run_input("pub", "echo hi"), WITHIN).await;
    assert_eq!(run.status, 401, "a run without a key, metrics_public");
}

#[tokio::test(flavor = "multi_thread")]
async fn openapi_json_is_served_as_the_file() {
    let gw = Gateway::start("{}", true).await;
    let resp = reqwest::get(format!("{}/openapi.json", gw.base))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    let served: Value = resp.json().await.unwrap();
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("openapi/openapi.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(served, file);
    assert!(served["openapi"].as_str().unwrap().starts_with("3.1"));
}

// ---------------------------------------------------------------------------------------
// Traces.

/// A 1.0 upstream that completes every streamed message as task T1 in context C1.
async fn completing_upstream() -> Fake {
    Fake::start_responder(|method, _| match method {
        "SendStreamingMessage" => Some(Answer::Frames(vec![
            task("TASK_STATE_SUBMITTED", None),
            update("TASK_STATE_COMPLETED", Some(("traced-reply", "traced"))),
        ])),
        _ => None,
    })
    .await
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[tokio::test(flavor = "multi_thread")]
async fn traces_follow_the_client_traceparent_to_the_upstream() {
    let receiver = Receiver::start();
    let up = completing_upstream().await;
    let config = json!({
        "agents": [{"name": "fake", "url": up.url}],
        "telemetry": {"otlp_endpoint": receiver.url},
    });
    let gw = Gateway::start(&config.to_string(), false).await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let resp = reqwest::Client::new()
        .post(gw.agent_url("fake"))
        .header("traceparent", format!("00-{trace_id}-{client_span}-01"))
        .json(&run_body("traced-thread", "traced-run", "go"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let raw = resp.text().await.unwrap();
    let events = sse_events(&raw);
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{raw}");
    let upstream_calls: Vec<_> = up.requests();
    assert!(
        upstream_calls
            .iter()
            .any(|r| r.method == "SendStreamingMessage"),
        "{:?}",
        up.calls()
    );

    let spans = receiver
        .spans_until(|spans| {
            let run = spans
                .iter()
                .any(|s| s["name"] == "agui.run" && s["traceId"] == trace_id);
            let calls = spans
                .iter()
                .filter(|s| s["name"] == "a2a.call" && s["traceId"] == trace_id)
                .count();
            run && calls >= upstream_calls.len()
        })
        .await;
    let runs: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "agui.run" && s["traceId"] == trace_id)
        .collect();
    assert_eq!(
        runs.len(),
        1,
        "one agui.run span in the client's trace; received: {}",
        json!(spans)
    );
    let run = runs[0];
    assert_eq!(
        run["parentSpanId"], client_span,
        "the client's span is the run's parent"
    );
    assert_eq!(attr(run, "agui.thread_id"), "traced-thread", "{run}");
    assert_eq!(attr(run, "a2a.agent"), "fake", "{run}");
    assert_eq!(attr(run, "a2a.context_id"), "C1", "{run}");
    assert_eq!(attr(run, "a2a.task_id"), "T1", "{run}");
    let state = attr(run, "a2a.task.state").as_str().unwrap_or_default();
    assert!(
        ["completed", "TASK_STATE_COMPLETED"].contains(&state),
        "a2a.task.state: {run}"
    );
    assert_eq!(attr(run, "agui.outcome"), "success", "{run}");

    let calls: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "a2a.call" && s["traceId"] == trace_id)
        .collect();
    for call in &calls {
        assert_eq!(
            call["parentSpanId"], run["spanId"],
            "a2a.call is the run's child: {call}"
        );
        assert!(attr(call, "a2a.method").is_string(), "{call}");
    }
    assert!(
        calls
            .iter()
            .any(|c| attr(c, "a2a.method") == "SendStreamingMessage"),
        "{}",
        json!(calls)
    );
    // Every upstream call carries the trace, its parent the a2a.call span of that call.
    for req in &upstream_calls {
        let header = req
            .header("traceparent")
            .unwrap_or_else(|| panic!("{} reached the upstream without a traceparent", req.method));
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts.len(), 4, "{header}");
        assert_eq!(
            (parts[0], parts[1], parts[3]),
            ("00", trace_id, "01"),
            "{header}"
        );
        assert!(
            calls
                .iter()
                .any(|c| c["spanId"] == parts[2] && attr(c, "a2a.method") == req.method.as_str()),
            "{} traceparent {header}: its parent is no a2a.call span of that method: {}",
            req.method,
            json!(calls)
        );
    }

    // Without a traceparent the run starts a trace of its own.
    let run = post_run(
        &gw.agent_url("fake"),
        &run_body("root-thread", "root-run", "go"),
        WITHIN,
    )
    .await;
    assert_run_finished(&run);
    let spans = receiver
        .spans_until(|spans| {
            spans
                .iter()
                .any(|s| s["name"] == "agui.run" && attr(s, "agui.thread_id") == "root-thread")
        })
        .await;
    let root_run = spans
        .iter()
        .find(|s| s["name"] == "agui.run" && attr(s, "agui.thread_id") == "root-thread")
        .unwrap_or_else(|| panic!("no agui.run span for the second run: {}", json!(spans)));
    let root_trace = root_run["traceId"].as_str().unwrap();
    assert_ne!(root_trace, trace_id);
    assert_ne!(root_trace, "0".repeat(32));
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_stay_fast_when_the_trace_collector_is_down() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = json!({"telemetry": {"otlp_endpoint": format!("http://127.0.0.1:{closed}")}});
    let gw = tokio::time::timeout(
        Duration::from_secs(5),
        Gateway::start(&config.to_string(), true),
    )
    .await
    .expect("the gateway starts without its collector");
    for i in 0..5 {
        let run = post_run(
            &gw.agent_url("demo"),
            &run_body(
                &format!("down-{i}"),
                &format!("down-run-{i}"),
                "echo still fast",
            ),
            Duration::from_secs(10),
        )
        .await;
        assert_run_finished(&run);
        assert!(
            run.elapsed < Duration::from_secs(2),
            "run {i} took {:?} with the collector down",
            run.elapsed
        );
    }
}

// ---------------------------------------------------------------------------------------
// Rate limits.

const KEY_A: &str = "ops-rate-key-a-0123456789";
const KEY_B: &str = "ops-rate-key-b-0123456789";

/// POSTs a run (as `key`'s caller, or anonymously) and reads it to the end:
/// `(status, retry-after, body)`.
async fn limited_run(
    url: String,
    key: Option<&'static str>,
    thread: String,
) -> (u16, Option<String>, String) {
    let mut req = reqwest::Client::new()
        .post(url)
        .json(&run_input(&thread, "echo hi"));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    if status == 429 {
        let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(
            content_type.starts_with("application/json"),
            "{content_type}"
        );
    }
    (status, retry, resp.text().await.unwrap())
}

fn assert_rate_limited(status: u16, retry: &Option<String>, body: &str) {
    assert_eq!(status, 429, "{body}");
    let seconds: u64 = retry
        .as_deref()
        .unwrap_or_else(|| panic!("a 429 without Retry-After: {body}"))
        .parse()
        .unwrap_or_else(|_| panic!("Retry-After is not whole seconds: {retry:?}"));
    assert!(seconds >= 1, "Retry-After {seconds}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().len() > 5,
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_over_the_rate_limit_get_429_per_caller() {
    let config = json!({
        "auth": {"api_keys": [{"name": "a", "key": KEY_A}, {"name": "b", "key": KEY_B}]},
        "rate_limits": {"runs_per_minute": 60, "burst": 3},
    });
    let gw = Gateway::start(&config.to_string(), true).await;
    let url = gw.agent_url("demo");
    // 6 runs from A and 3 from B, all at once.
    let mut runs = Vec::new();
    for i in 0..6 {
        runs.push(tokio::spawn(limited_run(
            url.clone(),
            Some(KEY_A),
            format!("rl-a-{i}"),
        )));
    }
    for i in 0..3 {
        runs.push(tokio::spawn(limited_run(
            url.clone(),
            Some(KEY_B),
            format!("rl-b-{i}"),
        )));
    }
    let mut results = Vec::new();
    for r in runs {
        results.push(r.await.unwrap());
    }
    let (a, b) = results.split_at(6);
    let mut limited = 0;
    for (status, retry, body) in a {
        if *status == 429 {
            assert_rate_limited(*status, retry, body);
            limited += 1;
        } else {
            assert_eq!(*status, 200, "{body}");
            assert!(body.contains("RUN_FINISHED"), "{}", tail(body, 600));
        }
    }
    // A burst of 3, refilled at 1 a second: 2 or 3 of the 6 are refused.
    assert!(
        (2..=3).contains(&limited),
        "{limited} of A's 6 runs got 429: {:?}",
        a.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    for (status, _, body) in b {
        assert_eq!(*status, 200, "B has a bucket of its own: {body}");
        assert!(body.contains("RUN_FINISHED"), "{}", tail(body, 600));
    }
    // Only runs are limited: A still reads.
    let agents = reqwest::Client::new()
        .get(format!("{}/agents", gw.base))
        .bearer_auth(KEY_A)
        .send()
        .await
        .unwrap();
    assert_eq!(agents.status(), 200);
    let m = scrape(&gw, Some(KEY_A)).await;
    m.family("agui_gateway_rate_limited_total", "counter");
    assert_eq!(
        m.value("agui_gateway_rate_limited_total", &[]),
        f64::from(limited),
        "rate_limited_total"
    );
    assert_eq!(
        m.value(
            "agui_gateway_runs_total",
            &[("agent", "demo"), ("outcome", "success")]
        ),
        f64::from(9 - limited),
        "a refused run is not a run"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn anonymous_callers_share_one_bucket_per_address() {
    let config = json!({"rate_limits": {"runs_per_minute": 60, "burst": 2}});
    let gw = Gateway::start(&config.to_string(), true).await;
    let url = gw.agent_url("demo");
    let runs: Vec<_> = (0..5)
        .map(|i| tokio::spawn(limited_run(url.clone(), None, format!("anon-{i}"))))
        .collect();
    let mut limited = 0;
    for r in runs {
        let (status, retry, body) = r.await.unwrap();
        if status == 429 {
            assert_rate_limited(status, &retry, &body);
            limited += 1;
        } else {
            assert_eq!(status, 200, "{body}");
        }
    }
    assert!(
        (2..=3).contains(&limited),
        "{limited} of 5 anonymous runs got 429"
    );
    assert_eq!(
        reqwest::get(format!("{}/healthz", gw.base))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        reqwest::get(format!("{}/agents", gw.base))
            .await
            .unwrap()
            .status(),
        200
    );
    let m = scrape(&gw, None).await;
    assert_eq!(
        m.value("agui_gateway_rate_limited_total", &[]),
        f64::from(limited)
    );
}

// ---------------------------------------------------------------------------------------
// The OpenAPI description against the live gateway.

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_nothing_against_the_live_gateway() {
    const ST_KEY: &str = "ops-schemathesis-key-0123456789";
    let config = json!({"auth": {"api_keys": [{"name": "st", "key": ST_KEY}]}});
    let gw = Gateway::start(&config.to_string(), true).await;
    let st = root().join("tests/ops/.venv/bin/schemathesis");
    ops_python();
    let started = Instant::now();
    let config = root().join("tests/ops/schemathesis.toml");
    let run = tokio::process::Command::new(&st)
        .arg("--config-file")
        .arg(&config)
        .args(["run", &format!("{}/openapi.json", gw.base)])
        // Every check (Schemathesis 4's default), as tests/ops/schemathesis.toml tunes them.
        .args(["--max-examples", "10"])
        .args(["--request-timeout", "10"])
        .args(["--workers", "1"])
        .args(["--seed", "20260101"])
        .args(["--generation-database", "none"])
        .args(["--header", &format!("Authorization: Bearer {ST_KEY}")])
        .args(["--no-color", "--output-truncate", "false"])
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("schemathesis did not finish within 120 s (a hanging route?)")
        .expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis failed ({:?}, {:?}):\n{}\n{}",
        out.status,
        started.elapsed(),
        tail(&stdout, 20_000),
        String::from_utf8_lossy(&out.stderr)
    );
    // It tested every operation the document describes (summary: "Selected: N/N",
    // "Tested: N").
    let number_after = |label: &str| -> Option<String> {
        let line = stdout.lines().find(|l| l.trim_start().starts_with(label))?;
        Some(line.trim_start()[label.len()..].trim().to_owned())
    };
    let selected = number_after("Selected:").unwrap_or_else(|| panic!("no summary: {stdout}"));
    let tested = number_after("Tested:").unwrap_or_else(|| panic!("no summary: {stdout}"));
    let (picked, total) = selected.split_once('/').expect("Selected: N/M");
    // Every operation but those tests/ops/schemathesis.toml turns off (each says why).
    let off = std::fs::read_to_string(&config)
        .unwrap()
        .lines()
        .filter(|l| l.trim() == "enabled = false")
        .count();
    let total: usize = total.trim().parse().unwrap();
    assert_eq!(
        picked.trim(),
        (total - off).to_string(),
        "every operation selected but {off} turned off: {selected}"
    );
    assert_eq!(tested, picked.trim(), "every operation tested");
    assert!(tested.parse::<u32>().unwrap() >= 8, "{stdout}");
}
