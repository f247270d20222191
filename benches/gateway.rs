//! Benchmark: the same scripted load from the demo agent, read directly over A2A and read
//! through the gateway, in the same run. Prints a table (Markdown) of events/s, time to the
//! last event, added latency per event (p50/p99), the gateway's peak RSS, and the extra
//! memory of 1,000 open idle streams. Not a test: nothing here fails on a number.
//!
//! `cargo bench --bench gateway`. Env overrides: BENCH_EVENTS and BENCH_BYTES (the flat-out
//! load, 20,000 x 256), BENCH_ROUNDS (7), BENCH_PACED_EVENTS and BENCH_PACED_RATE (the paced
//! load for latency, 6,000 at 2,000/s), BENCH_IDLE_STREAMS (1,000), BENCH_GATEWAY_WORKERS
//! (the gateway's tokio worker threads; default: one per core).
//!
//! The demo agent runs in this process; the gateway runs as its own process (the release
//! binary) so its memory is measured alone. Every event of `bench N K` carries its send time,
//! so latency is measured per event, from the agent's send to the reader's receipt.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agui_a2a_gateway::demo;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Gateway {
    child: Child,
    base: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_gateway(demo_url: &str) -> Gateway {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_agui-a2a-gateway"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--agent",
            &format!("demo={demo_url}"),
        ])
        .env("RUST_LOG", "warn")
        .envs(std::env::var("BENCH_GATEWAY_WORKERS").map(|w| ("TOKIO_WORKER_THREADS", w)))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the gateway binary");
    let gateway = Gateway {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..100 {
        if let Ok(r) = reqwest::get(format!("{}/readyz", gateway.base)).await {
            if r.status().is_success() {
                return gateway;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("gateway did not become ready");
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The send stamp `t=<nanos>` at the start of a bench event's text.
fn stamp(text: &str) -> Option<u128> {
    text.strip_prefix("t=")?.split(' ').next()?.parse().ok()
}

struct Sample {
    events: usize,
    last_event: Duration,
    latencies_us: Vec<f64>,
}

/// Reads one SSE response; `text_of` extracts a bench event's text from a frame.
async fn read(
    resp: reqwest::Response,
    started: Instant,
    prefix: &str,
    text_of: fn(&Value) -> Option<&str>,
) -> Sample {
    let mut stream = resp.bytes_stream().eventsource();
    let mut latencies_us = Vec::new();
    let mut events = 0;
    let mut last_event = Duration::ZERO;
    while let Some(Ok(ev)) = stream.next().await {
        let now = demo::stamp_nanos();
        // Only frames that can carry a bench event are parsed, on both paths.
        if !ev.data.starts_with(prefix) {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
            continue;
        };
        if let Some(sent) = text_of(&v).and_then(stamp) {
            events += 1;
            latencies_us.push(now.saturating_sub(sent) as f64 / 1_000.0);
            last_event = started.elapsed();
        }
    }
    Sample {
        events,
        last_event,
        latencies_us,
    }
}

fn a2a_text(v: &Value) -> Option<&str> {
    v.pointer("/result/statusUpdate/status/message/parts/0/text")?
        .as_str()
}

fn agui_text(v: &Value) -> Option<&str> {
    (v["type"] == "TEXT_MESSAGE_CONTENT")
        .then(|| v["delta"].as_str())
        .flatten()
}

async fn direct(http: &reqwest::Client, demo_url: &str, load: &str, id: usize) -> Sample {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "SendStreamingMessage", "params": {"message": {
        "messageId": format!("bench-direct-{id}"), "role": "ROLE_USER", "parts": [{"text": load}]}}});
    let started = Instant::now();
    let resp = http
        .post(demo_url)
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    read(resp, started, "{", a2a_text).await
}

async fn via_gateway(http: &reqwest::Client, gw: &str, load: &str, id: usize) -> Sample {
    let body = json!({"threadId": format!("bench-{id}"), "runId": format!("r{id}"), "protocolVersion": "1.0",
        "messages": [{"id": format!("bench-gw-{id}"), "role": "user", "content": load}]});
    let started = Instant::now();
    let resp = http
        .post(format!("{gw}/agents/demo"))
        .json(&body)
        .send()
        .await
        .unwrap();
    read(
        resp,
        started,
        r#"{"type":"TEXT_MESSAGE_CONTENT""#,
        agui_text,
    )
    .await
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

struct Summary {
    events_per_s: f64,
    last_ms: f64,
    p50: f64,
    p99: f64,
}

fn summarize(samples: &[Sample]) -> Summary {
    let mut lat: Vec<f64> = samples
        .iter()
        .flat_map(|s| s.latencies_us.iter().copied())
        .collect();
    lat.sort_by(f64::total_cmp);
    Summary {
        events_per_s: median(
            samples
                .iter()
                .map(|s| s.events as f64 / s.last_event.as_secs_f64())
                .collect(),
        ),
        last_ms: median(
            samples
                .iter()
                .map(|s| s.last_event.as_secs_f64() * 1e3)
                .collect(),
        ),
        p50: percentile(&lat, 0.5),
        p99: percentile(&lat, 0.99),
    }
}

async fn idle_streams(http: &reqwest::Client, gw: &Gateway, count: usize) -> (u64, u64) {
    let pid = gw.child.id();
    let before = rss_kib(pid, "VmRSS:");
    let mut open = Vec::with_capacity(count);
    for i in 0..count {
        let body = json!({"threadId": format!("idle-{i}"), "runId": "r", "messages": [{"id": format!("idle-{i}"), "role": "user", "content": "idle 120"}]});
        open.push(
            http.post(format!("{}/agents/demo", gw.base))
                .json(&body)
                .send(),
        );
    }
    let mut streams = Vec::with_capacity(count);
    for r in futures::future::join_all(open).await {
        let mut s = r.expect("idle stream").bytes_stream().eventsource();
        // Wait until the run is live upstream (RUN_STARTED arrives with the task).
        let _ = s.next().await;
        streams.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = rss_kib(pid, "VmRSS:");
    drop(streams);
    (before, during)
}

#[tokio::main]
async fn main() {
    // `cargo test --benches` runs this with `--bench` absent: stay quick there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("benchmark skipped (run `cargo bench --bench gateway`)");
        return;
    }
    let n = env_or("BENCH_EVENTS", 20_000);
    let k = env_or("BENCH_BYTES", 256);
    let idle = env_or("BENCH_IDLE_STREAMS", 1_000);
    let rounds = env_or("BENCH_ROUNDS", 7);
    let rate = env_or("BENCH_PACED_RATE", 2_000);
    let paced_n = env_or("BENCH_PACED_EVENTS", 6_000);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let demo_url = demo::spawn(listener).await.unwrap();
    let gw = start_gateway(&demo_url).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(2048)
        .tcp_nodelay(true)
        .build()
        .unwrap();

    // Warm up both paths, then alternate so both see the same machine conditions.
    let flat_out = format!("bench {n} {k}");
    let paced = format!("bench {paced_n} {k} {rate}");
    direct(&http, &demo_url, "bench 500 64", 0).await;
    via_gateway(&http, &gw.base, "bench 500 64", 0).await;
    let (mut d, mut g, mut dp, mut gp) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        d.push(direct(&http, &demo_url, &flat_out, round).await);
        g.push(via_gateway(&http, &gw.base, &flat_out, round).await);
    }
    for round in 1..=2 {
        dp.push(direct(&http, &demo_url, &paced, 100 + round).await);
        gp.push(via_gateway(&http, &gw.base, &paced, 100 + round).await);
    }
    assert!(
        d.iter().chain(&g).all(|s| s.events == n),
        "every event arrives on both paths"
    );
    assert!(
        dp.iter().chain(&gp).all(|s| s.events == paced_n),
        "every paced event arrives"
    );
    let peak = rss_kib(gw.child.id(), "VmHWM:");
    let (before, during) = idle_streams(&http, &gw, idle).await;
    let (ds, gs) = (summarize(&d), summarize(&g));
    // Rounds alternate direct/gateway, so each pair saw the same machine conditions: the
    // median of the pairwise ratios is steadier than a ratio of medians.
    let flat_ratio = median(
        d.iter()
            .zip(&g)
            .map(|(d, g)| g.last_event.as_secs_f64() / d.last_event.as_secs_f64())
            .collect(),
    );
    let (dps, gps) = (summarize(&dp), summarize(&gp));
    let extra_mib = during.saturating_sub(before) as f64 / 1024.0;

    let cores = std::thread::available_parallelism().map_or(0, |p| p.get());
    println!("\nagui-a2a-gateway benchmark ({cores} cores). Throughput: `{flat_out}` (as fast as the agent can), {rounds} alternating rounds per path, medians (the ratio: median of per-round ratios). Latency: `{paced}` ({rate} events/s), 2 rounds per path, all events.");
    println!();
    println!("| metric | direct A2A | via gateway | gateway vs direct |");
    println!("|---|---:|---:|---:|");
    println!(
        "| events/s | {:.0} | {:.0} | {:.2}x |",
        ds.events_per_s,
        gs.events_per_s,
        gs.events_per_s / ds.events_per_s
    );
    println!(
        "| time to last event, flat out (ms) | {:.1} | {:.1} | {:.2}x (target <= 1.10x) |",
        ds.last_ms, gs.last_ms, flat_ratio
    );
    println!(
        "| time to last event, paced (ms) | {:.1} | {:.1} | {:.2}x (target <= 1.10x) |",
        dps.last_ms,
        gps.last_ms,
        gps.last_ms / dps.last_ms
    );
    println!(
        "| latency per event p50 (us) | {:.0} | {:.0} | {:+.0} us |",
        dps.p50,
        gps.p50,
        gps.p50 - dps.p50
    );
    println!(
        "| latency per event p99 (us) | {:.0} | {:.0} | {:+.0} us |",
        dps.p99,
        gps.p99,
        gps.p99 - dps.p99
    );
    println!(
        "| gateway peak RSS (MiB) | - | {:.1} | |",
        peak as f64 / 1024.0
    );
    println!("| gateway RSS, idle -> {idle} open idle streams (MiB) | - | {:.1} -> {:.1} | +{extra_mib:.1} MiB (target < 64) |", before as f64 / 1024.0, during as f64 / 1024.0);
    println!(
        "| memory per open stream (KiB) | - | {:.1} | |",
        during.saturating_sub(before) as f64 / idle as f64
    );
}
