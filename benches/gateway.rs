//! Benchmark: the same scripted load from the demo agent, read directly over A2A and read
//! through the gateway, in the same run. Prints one Markdown table: events/s, time to the
//! last event, the gateway's CPU time per bridged A2A event, AG-UI bytes written per A2A byte
//! read, added latency per event (p50/p99), the gateway's RSS (idle and peak), and the extra
//! memory per open stream, for quiet streams (`idle S`) and ticking ones (`slow N`); then the
//! same gateway CPU per A2A event (the flat-out load) and memory per open idle stream over
//! each A2A binding the demo agent serves — JSON-RPC, HTTP+JSON, gRPC, one agent pinned to
//! each on the same demo URL — with each figure's ratio to JSON-RPC's; the same gateway CPU
//! per A2A event with the run written in AG-UI's protobuf encoding beside SSE's (JSON-RPC,
//! the flat-out load, rounds alternating with the bindings'); and the same over
//! TLS: JSON-RPC from the demo agent behind TLS with a test CA (the gateway trusting it by
//! `tls.ca_file`) against plain http from the same process, and memory per open idle
//! stream over TLS against plain JSON-RPC's. Not a test: nothing here fails on a number.
//!
//! `cargo bench --bench gateway`. Env overrides:
//! - BENCH_EVENTS, BENCH_BYTES: the headline flat-out load `bench N K` (20,000 x 100);
//!   BENCH_ROUNDS (7) alternating rounds per path.
//! - BENCH_CHUNK_SIZES: more chunk sizes for the flat-out load, comma-separated ("1024,16384");
//!   BENCH_CHUNK_EVENTS (5,000) events and BENCH_CHUNK_ROUNDS (3) rounds for each.
//! - BENCH_PACED_EVENTS, BENCH_PACED_RATE: the paced load for latency (6,000 at 2,000/s).
//! - BENCH_IDLE_STREAMS (1,000) open `idle 120` streams; BENCH_TICKING_STREAMS (500) open
//!   `slow 1200` streams (a tick every 100 ms). The benchmark's gateway admits 20,000
//!   concurrent runs and connections; each open stream takes two of the gateway's file
//!   descriptors (`ulimit -n`) and one of the reader's and the agent's.
//! - BENCH_GATEWAY_WORKERS: the gateway's tokio worker threads (default: one per core).
//! - BENCH_BINDING_ROUNDS (5): rounds of the flat-out load per binding (and per side of
//!   the TLS comparison, and in the protobuf encoding), all alternating within each round;
//!   the idle streams per binding
//!   (and over TLS) are BENCH_IDLE_STREAMS.
//! - BENCH_BASELINE_GATEWAY: the path of another gateway binary (a release build of an
//!   earlier commit, say) to compare this build's with, A/B in the same run: a second table
//!   puts the two side by side, with this build's ratio to the baseline, for the headline
//!   flat-out load's gateway CPU per A2A event and time to the last event (BENCH_ROUNDS
//!   rounds, the two gateways alternating, which goes first swapped every round) and the
//!   memory per open idle stream (BENCH_IDLE_STREAMS streams on a fresh gateway of each,
//!   BENCH_BASELINE_IDLE_ROUNDS (1) alternating rounds, the median). Both gateways get the
//!   same config and the same upstreams. Unset, the run is the one above and prints no
//!   such table.
//!
//! The demo agent runs in a process of its own (the release binary with `--demo`), the
//! gateway in another (the release binary), the readers in this one: the gateway's memory and
//! CPU time (utime + stime from /proc/<pid>/stat) are its alone, and the upstream shares a
//! process with neither. Every event of `bench N K` carries its send time, so latency is measured
//! per event, from the agent's send to the reader's receipt. CPU per A2A event: the gateway's
//! CPU over its rounds of a load, divided by the A2A events of those rounds (as many as the
//! direct read of the same load counts). Bytes: SSE response bodies, the direct A2A stream
//! against the gateway's AG-UI stream for the same load. The memory figures use a fresh
//! gateway per kind of stream and count only streams that are verifiably open when RSS is
//! read ([`MEMORY_SETTLE`] after the last one opened): each has seen `RUN_STARTED` and no
//! terminal event, and its connection is up; unless all are, the per-stream figure is
//! printed as n/a with the count. The binding comparison's CPU figures come from rounds of
//! their own, the three bindings alternating within each round on one gateway; its memory
//! figures from a fresh gateway per binding, the JSON-RPC one being the idle-stream
//! measurement above.
//!
//! TLS: the benchmark makes a CA and a certificate for 127.0.0.1 (rcgen) and starts a second
//! demo agent process, this benchmark's own binary with [`TLS_DEMO_ARG`], serving the demo
//! behind TLS (`demo::spawn_tls`, ALPN `h2` and `http/1.1`) and over plain http on two
//! ports. Both sides of the TLS comparison come from that process, so they differ in TLS
//! only (the other rows' agent is the gateway binary's `--demo`); their rounds alternate
//! with the bindings'.
//!
//! `cargo bench --bench gateway -- capacity` runs only the capacity mode instead
//! ([`capacity`]: what one replica holds within 1 ms of added p99 latency, and its memory at
//! 1,000 and 10,000 open idle streams); the default run leaves it out, it takes minutes.

use std::cell::Cell;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agui_a2a_gateway::demo;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};

/// Open streams are opened this many at a time ([`OpenStreams::measure`]).
const OPEN_BATCH: usize = 1_000;

/// How long open streams run before the gateway's RSS is read.
const MEMORY_SETTLE: Duration = Duration::from_secs(11);

#[path = "gateway/baseline.rs"]
mod baseline;
#[path = "gateway/capacity.rs"]
mod capacity;
#[path = "support.rs"]
mod support;

use support::{
    clock_ticks_per_s, cpu_ticks, env_or, free_port, percentile, spawn_demo_agent, write_test_pki,
};

struct Gateway {
    child: Child,
    base: String,
}

impl Gateway {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gateway's config for the benchmark: the loads stream more text per run (`bench 5000
/// 16384` is 80 MiB) than the default `limits.max_text_bytes_per_run` allows, and the open
/// stream counts may go beyond the default `max_concurrent_runs` / `max_connections`.
const BENCH_LIMITS: &str = "limits:\n  max_text_bytes_per_run: 1073741824\n  max_events_per_run: 10000000\n  max_concurrent_runs: 20000\n  max_connections: 20000\n";

/// The bindings compared: as the table names them, the agent pinned to each (`binding:`) on
/// the demo agent's URL. The first is the one every other row of the table uses.
const BINDINGS: [(&str, &str, &str); 3] = [
    ("JSON-RPC", "jsonrpc", "demo"),
    ("HTTP+JSON", "http+json", "demo-http-json"),
    ("gRPC", "grpc", "demo-grpc"),
];

/// The default agent: JSON-RPC.
const AGENT: &str = BINDINGS[0].2;

/// The TLS comparison, JSON-RPC on both sides, both from the TLS demo process: as the table
/// names them, and the agent.
const TLS_SIDES: [(&str, &str); 2] = [
    (
        "JSON-RPC, plain http from the TLS agent's process",
        "demo-plain",
    ),
    ("JSON-RPC over TLS", "demo-tls"),
];

/// The argument that makes this benchmark's binary the TLS demo agent
/// ([`serve_tls_demo`]), followed by its certificate and key files (PEM).
const TLS_DEMO_ARG: &str = "--tls-demo-agent";

/// The upstreams: the demo agent (`--demo`), and the TLS demo process.
struct Upstreams {
    demo_url: String,
    tls: TlsDemo,
}

/// The demo agent behind TLS and over plain http in one process of its own, and the PEM
/// file of the CA that signed its certificate.
struct TlsDemo {
    process: Gateway,
    plain_url: String,
    ca_file: PathBuf,
}

async fn start_gateway(up: &Upstreams) -> Gateway {
    spawn_gateway(&gateway_config(up)).await
}

/// The config of the benchmark's gateway: an agent per binding and per side of the TLS
/// comparison.
fn gateway_config(up: &Upstreams) -> String {
    let demo_url = &up.demo_url;
    let mut agents: String = BINDINGS
        .iter()
        .map(|(_, pin, name)| format!("  - {{name: {name}, url: '{demo_url}', binding: {pin}}}\n"))
        .collect();
    let [(_, plain), (_, tls)] = TLS_SIDES;
    let (tls_url, plain_url) = (&up.tls.process.base, &up.tls.plain_url);
    let ca_file = up.tls.ca_file.display();
    agents.push_str(&format!(
        "  - {{name: {plain}, url: '{plain_url}', binding: jsonrpc}}\n  - {{name: {tls}, url: '{tls_url}', binding: jsonrpc, tls: {{ca_file: '{ca_file}'}}}}\n"
    ));
    format!("{BENCH_LIMITS}agents:\n{agents}")
}

/// This build's gateway binary with the config `yaml`, once every agent's card was read.
async fn spawn_gateway(yaml: &str) -> Gateway {
    spawn_gateway_binary(env!("CARGO_BIN_EXE_agui-a2a-gateway").as_ref(), yaml).await
}

/// The gateway binary `binary` with the config `yaml` (a file of its own), once every
/// agent's card was read.
async fn spawn_gateway_binary(binary: &std::path::Path, yaml: &str) -> Gateway {
    let port = free_port();
    let config = std::env::temp_dir().join(format!(
        "agui-gateway-bench-{}-{port}.yaml",
        std::process::id()
    ));
    std::fs::write(&config, yaml).expect("write the benchmark config");
    let child = Command::new(binary)
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--config",
            &config.display().to_string(),
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
        // Strict: every card read (docs/operations.md#readiness).
        if let Ok(r) = reqwest::get(format!("{}/readyz?strict", gateway.base)).await {
            if r.status().is_success() {
                return gateway;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("gateway did not become ready");
}

/// The demo agent in a process of its own (the gateway binary with `--demo`), so the
/// upstream shares no process with the gateway or the readers: its URL is the one the
/// binary logs.
fn start_demo_agent() -> Gateway {
    let (child, base) = spawn_demo_agent();
    Gateway { child, base }
}

/// Starts the TLS demo process (this binary with [`TLS_DEMO_ARG`]): its URLs are the line
/// it prints.
fn start_tls_demo() -> TlsDemo {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("agui-gateway-bench-tls-{}", std::process::id()));
    let (ca_file, cert, key) = write_test_pki(&dir);
    let mut child = Command::new(std::env::current_exe().expect("this benchmark's binary"))
        .arg(TLS_DEMO_ARG)
        .args([&cert, &key])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the TLS demo agent");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("its stdout"))
        .read_line(&mut line)
        .expect("the TLS demo agent's URLs");
    let url = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in the TLS demo agent's line {line:?}"))
            .to_owned()
    };
    let (plain_url, tls_url) = (url("plain="), url("tls="));
    TlsDemo {
        process: Gateway {
            child,
            base: tls_url,
        },
        plain_url,
        ca_file,
    }
}

/// The TLS demo process ([`TLS_DEMO_ARG`] `CERT KEY`): the demo agent behind TLS and,
/// another instance, over plain http, on loopback ports it prints as
/// `plain=<url> tls=<url>`; then serves until killed.
async fn serve_tls_demo(cert: &str, key: &str) {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .expect("the demo's certificate");
    let key = PrivateKeyDer::from_pem_file(key).expect("the demo's key");
    let tls = demo::tls_config(chain, key).expect("the demo's TLS configuration");
    let listener = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let plain = demo::spawn(listener().await.expect("a port"))
        .await
        .expect("the plain demo");
    let secure = demo::spawn_tls(listener().await.expect("a port"), tls)
        .await
        .expect("the TLS demo");
    println!("plain={plain} tls={secure}");
    std::future::pending::<()>().await;
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

/// The send stamps `t=<nanos>` in a bench event's text (one per chunk, should a reader ever
/// see chunks merged).
fn stamps(text: &str) -> impl Iterator<Item = u128> + '_ {
    text.match_indices("t=").filter_map(|(at, _)| {
        let digits = &text[at + 2..];
        let end = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        digits[..end].parse().ok()
    })
}

#[derive(Default)]
struct Sample {
    /// Bench events (send stamps) received.
    events: usize,
    /// SSE events of any kind.
    frames: usize,
    /// Response body bytes.
    bytes: usize,
    last_event: Duration,
    latencies_us: Vec<f64>,
    /// The gateway's CPU ticks over the read (gateway path only).
    cpu_ticks: u64,
}

/// Reads one SSE response; `wanted` picks the frames that can carry a bench event (only those
/// are parsed, on both paths) and `text_of` extracts the event's text from one.
async fn read(
    resp: reqwest::Response,
    started: Instant,
    wanted: fn(&str) -> bool,
    text_of: fn(&Value) -> Option<&str>,
) -> Sample {
    let bytes = Cell::new(0);
    let mut stream = resp
        .bytes_stream()
        .inspect(|chunk| {
            if let Ok(c) = chunk {
                bytes.set(bytes.get() + c.len());
            }
        })
        .eventsource();
    let mut s = Sample::default();
    while let Some(Ok(ev)) = stream.next().await {
        let now = demo::stamp_nanos();
        s.frames += 1;
        if !wanted(&ev.data) {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
            continue;
        };
        let Some(text) = text_of(&v) else {
            continue;
        };
        let before = s.events;
        for sent in stamps(text) {
            s.events += 1;
            s.latencies_us
                .push(now.saturating_sub(sent) as f64 / 1_000.0);
        }
        if s.events > before {
            s.last_event = started.elapsed();
        }
    }
    drop(stream);
    s.bytes = bytes.get();
    s
}

/// Reads one run in AG-UI's protobuf encoding (a 4-byte big-endian length, then an
/// `ag_ui.Event`) with a parser of its own: only `TEXT_MESSAGE_CONTENT` frames (envelope field
/// 2) are opened, for their `delta` (field 3), as [`read`] parses only the SSE frames that
/// can carry a bench event.
async fn read_protobuf(resp: reqwest::Response, started: Instant) -> Sample {
    assert_eq!(resp.headers()["content-type"], PROTOBUF);
    let mut s = Sample::default();
    let mut body = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        let now = demo::stamp_nanos();
        s.bytes += chunk.len();
        buf.extend_from_slice(&chunk);
        let mut at = 0;
        while buf.len() >= at + 4 {
            let len = u32::from_be_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
            let Some(frame) = buf.get(at + 4..at + 4 + len) else {
                break;
            };
            s.frames += 1;
            let delta = field(frame, 2).and_then(|content| field(content, 3));
            if let Some(text) = delta.and_then(|d| std::str::from_utf8(d).ok()) {
                let before = s.events;
                for sent in stamps(text) {
                    s.events += 1;
                    s.latencies_us
                        .push(now.saturating_sub(sent) as f64 / 1_000.0);
                }
                if s.events > before {
                    s.last_event = started.elapsed();
                }
            }
            at += 4 + len;
        }
        buf.drain(..at);
    }
    s
}

/// The bytes of the first length-delimited field `number` of protobuf message `m`.
fn field(m: &[u8], number: u64) -> Option<&[u8]> {
    fn varint(m: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *m.get(*at)?;
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut at = 0;
    while at < m.len() {
        let tag = varint(m, &mut at)?;
        match tag & 7 {
            0 => {
                varint(m, &mut at)?;
            }
            1 => at += 8,
            5 => at += 4,
            2 => {
                let len = usize::try_from(varint(m, &mut at)?).ok()?;
                let bytes = m.get(at..at.checked_add(len)?)?;
                if tag >> 3 == number {
                    return Some(bytes);
                }
                at += len;
            }
            _ => return None,
        }
    }
    None
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
    read(resp, started, |_| true, a2a_text).await
}

fn run_input(thread: &str, load: &str) -> Value {
    json!({"threadId": thread, "runId": format!("r-{thread}"), "protocolVersion": "1.0",
        "messages": [{"id": format!("m-{thread}"), "role": "user", "content": load}]})
}

async fn via_gateway(
    http: &reqwest::Client,
    gw: &Gateway,
    agent: &str,
    load: &str,
    id: usize,
) -> Sample {
    via_gateway_in(Encoding::Sse, http, gw, agent, load, id).await
}

/// How the gateway writes a run: AG-UI's SSE, or its HTTP+Protobuf encoding.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Sse,
    Protobuf,
}

/// AG-UI's HTTP+Protobuf media type.
const PROTOBUF: &str = "application/vnd.ag-ui.event+proto";

/// `load` through the gateway's `agent` on a thread of its own (`id`), read in `encoding`,
/// with the gateway's CPU over the run.
async fn via_gateway_in(
    encoding: Encoding,
    http: &reqwest::Client,
    gw: &Gateway,
    agent: &str,
    load: &str,
    id: usize,
) -> Sample {
    let tag = if encoding == Encoding::Protobuf {
        "-proto"
    } else {
        ""
    };
    let body = run_input(&format!("bench-{agent}{tag}-{id}"), load);
    let cpu_before = cpu_ticks(gw.pid());
    let started = Instant::now();
    let mut request = http.post(format!("{}/agents/{agent}", gw.base)).json(&body);
    if encoding == Encoding::Protobuf {
        request = request.header("accept", PROTOBUF);
    }
    let resp = request.send().await.unwrap();
    let mut s = match encoding {
        Encoding::Sse => {
            let is_text = |d: &str| d.contains(r#""TEXT_MESSAGE_CONTENT""#);
            read(resp, started, is_text, agui_text).await
        }
        Encoding::Protobuf => read_protobuf(resp, started).await,
    };
    s.cpu_ticks = cpu_ticks(gw.pid()).saturating_sub(cpu_before);
    s
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
    bytes: usize,
    frames: usize,
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
        bytes: samples.iter().map(|s| s.bytes).sum(),
        frames: samples.iter().map(|s| s.frames).sum(),
    }
}

/// One load read both ways, in alternating rounds.
struct Paired {
    load: String,
    direct: Vec<Sample>,
    gateway: Vec<Sample>,
}

impl Paired {
    async fn run(
        http: &reqwest::Client,
        demo_url: &str,
        gw: &Gateway,
        load: String,
        events: usize,
        rounds: usize,
        first_id: usize,
    ) -> Self {
        let (mut direct_samples, mut gateway_samples) = (Vec::new(), Vec::new());
        for id in first_id..first_id + rounds {
            direct_samples.push(direct(http, demo_url, &load, id).await);
            gateway_samples.push(via_gateway(http, gw, AGENT, &load, id).await);
        }
        assert!(
            direct_samples
                .iter()
                .chain(&gateway_samples)
                .all(|s| s.events == events),
            "every event of `{load}` arrives on both paths"
        );
        Self {
            load,
            direct: direct_samples,
            gateway: gateway_samples,
        }
    }

    /// Rounds alternate direct/gateway, so each pair saw the same machine conditions: the
    /// median of the pairwise ratios is steadier than a ratio of medians.
    fn last_event_ratio(&self) -> f64 {
        median(
            self.direct
                .iter()
                .zip(&self.gateway)
                .map(|(d, g)| g.last_event.as_secs_f64() / d.last_event.as_secs_f64())
                .collect(),
        )
    }

    /// The gateway's CPU time (µs) per A2A event it read: the upstream stream of a load has
    /// as many events as the direct read of the same load.
    fn cpu_us_per_event(&self, ticks_per_s: f64) -> f64 {
        let ticks: u64 = self.gateway.iter().map(|s| s.cpu_ticks).sum();
        let upstream: usize = self.direct.iter().map(|s| s.frames).sum();
        ticks as f64 / ticks_per_s * 1e6 / upstream as f64
    }
}

/// Where one open stream is.
#[derive(Default)]
struct Watch {
    /// STARTED once `RUN_STARTED` arrived; ENDED once a terminal event arrived, the stream
    /// ended or broke, or the request failed.
    seen: AtomicU8,
    /// `TEXT_MESSAGE_CONTENT` events received: one per tick of `slow N`.
    chunks: AtomicUsize,
}

const STARTED: u8 = 1;
const ENDED: u8 = 2;

impl Watch {
    fn open(&self) -> bool {
        self.seen.load(Ordering::SeqCst) == STARTED
    }

    fn settled(&self) -> bool {
        self.seen.load(Ordering::SeqCst) != 0
    }

    async fn follow(&self, http: reqwest::Client, url: String, body: Value) {
        if let Ok(resp) = http.post(url).json(&body).send().await {
            if resp.status().is_success() {
                let mut stream = resp.bytes_stream().eventsource();
                while let Some(Ok(ev)) = stream.next().await {
                    let v: Value = serde_json::from_str(&ev.data).unwrap_or_default();
                    let flag = match v["type"].as_str() {
                        Some("RUN_STARTED") => STARTED,
                        Some("RUN_FINISHED" | "RUN_ERROR") => ENDED,
                        Some("TEXT_MESSAGE_CONTENT") => {
                            self.chunks.fetch_add(1, Ordering::SeqCst);
                            0
                        }
                        _ => 0,
                    };
                    self.seen.fetch_or(flag, Ordering::SeqCst);
                }
            }
        }
        self.seen.fetch_or(ENDED, Ordering::SeqCst);
    }
}

/// A fresh gateway's RSS with `count` runs of `load` open through it.
struct OpenStreams {
    /// "idle" or "ticking".
    kind: &'static str,
    /// Text chunks each stream's load sends per second (`slow N`: one per 100 ms).
    chunks_per_s_each: f64,
    load: String,
    requested: usize,
    /// Streams open (RUN_STARTED seen, nothing terminal, connection up) when RSS was read.
    open: usize,
    idle_kib: u64,
    open_kib: u64,
    /// Text chunks/s received across the streams in the second before RSS was read.
    chunks_per_s: f64,
}

impl OpenStreams {
    async fn measure(
        http: &reqwest::Client,
        gw: Gateway,
        agent: &str,
        kind: &'static str,
        load: String,
        chunks_per_s_each: f64,
        count: usize,
    ) -> Self {
        // One short run first, so what a first run sets up once is in the idle figure.
        via_gateway(http, &gw, agent, "bench 10 64", 0).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_kib = rss_kib(gw.pid(), "VmRSS:");
        let watches: Vec<Arc<Watch>> = (0..count).map(|_| Arc::default()).collect();
        let url = format!("{}/agents/{agent}", gw.base);
        // Opened a batch at a time, each settled before the next: opening thousands at once
        // holds as many transient upstream connections (each run's pick-up lookup) on top of
        // the streams', past the file-descriptor limit.
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut followers = Vec::new();
        for (batch, ws) in watches.chunks(OPEN_BATCH).enumerate() {
            for (i, w) in ws.iter().enumerate() {
                let (w, http, url) = (w.clone(), http.clone(), url.clone());
                let body = run_input(&format!("{kind}-{}", batch * OPEN_BATCH + i), &load);
                followers.push(tokio::spawn(async move { w.follow(http, url, body).await }));
            }
            while !ws.iter().all(|w| w.settled()) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let chunks = || -> usize {
            watches
                .iter()
                .map(|w| w.chunks.load(Ordering::SeqCst))
                .sum()
        };
        let (chunks_before, window) = (chunks(), Instant::now());
        // The steady state of open streams: what opening them used and freed (the pick-up
        // lookups' connections, request futures) leaves RSS within jemalloc's 10 s decay.
        tokio::time::sleep(MEMORY_SETTLE).await;
        let open_kib = rss_kib(gw.pid(), "VmRSS:");
        let chunks_per_s = (chunks() - chunks_before) as f64 / window.elapsed().as_secs_f64();
        // A stream can only go from open to ended: open now means open when RSS was read.
        let open = watches.iter().filter(|w| w.open()).count();
        for f in followers {
            f.abort();
        }
        Self {
            kind,
            chunks_per_s_each,
            load,
            requested: count,
            open,
            idle_kib,
            open_kib,
            chunks_per_s,
        }
    }

    /// The extra memory per stream, if every stream stayed open.
    fn per_stream_kib(&self) -> Option<f64> {
        let extra = self.open_kib.saturating_sub(self.idle_kib);
        (self.requested > 0 && self.open == self.requested)
            .then(|| extra as f64 / self.requested as f64)
    }

    fn table_rows(&self) {
        let mib = |kib: u64| kib as f64 / 1024.0;
        let (kind, load, n, open) = (self.kind, &self.load, self.requested, self.open);
        println!("| {kind} streams (`{load}`) open when RSS was read | - | {open} of {n} | |");
        println!(
            "| text chunks/s received across the {kind} streams while measured | - | {:.0} | {:.0} nominal |",
            self.chunks_per_s,
            self.chunks_per_s_each * open as f64
        );
        if n == 0 || open != n {
            println!("| memory per open {kind} stream (KiB) | - | n/a | not measured: only {open} of {n} `{load}` streams stayed open |");
            return;
        }
        let extra = self.open_kib.saturating_sub(self.idle_kib);
        println!(
            "| gateway RSS, idle -> {n} open {kind} streams (MiB) | - | {:.1} -> {:.1} | +{:.1} MiB |",
            mib(self.idle_kib),
            mib(self.open_kib),
            mib(extra)
        );
        println!(
            "| memory per open {kind} stream (KiB) | - | {:.1} | |",
            extra as f64 / n as f64
        );
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, cert, key, ..] = &args[..] {
        if flag == TLS_DEMO_ARG {
            return serve_tls_demo(cert, key).await;
        }
    }
    // `cargo test --benches` runs this with `--bench` absent: stay quick there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("benchmark skipped (run `cargo bench --bench gateway`)");
        return;
    }
    if args.iter().any(|a| a == "capacity") {
        return capacity::run(clock_ticks_per_s().0).await;
    }
    let n = env_or("BENCH_EVENTS", 20_000);
    let k = env_or("BENCH_BYTES", 100);
    let rounds = env_or("BENCH_ROUNDS", 7);
    let chunk_sizes: Vec<usize> = std::env::var("BENCH_CHUNK_SIZES")
        .unwrap_or_else(|_| "1024,16384".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let chunk_n = env_or("BENCH_CHUNK_EVENTS", 5_000);
    let chunk_rounds = env_or("BENCH_CHUNK_ROUNDS", 3);
    let rate = env_or("BENCH_PACED_RATE", 2_000);
    let paced_n = env_or("BENCH_PACED_EVENTS", 6_000);
    let idle_streams = env_or("BENCH_IDLE_STREAMS", 1_000);
    let binding_rounds = env_or("BENCH_BINDING_ROUNDS", 5);
    let ticking_streams = env_or("BENCH_TICKING_STREAMS", 500);
    let (ticks_per_s, ticks_assumed) = clock_ticks_per_s();

    let upstream = start_demo_agent();
    let demo_url = upstream.base.clone();
    let upstreams = Upstreams {
        demo_url: demo_url.clone(),
        tls: start_tls_demo(),
    };
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(2048)
        .tcp_nodelay(true)
        .build()
        .unwrap();

    let (flat, sized, dp, gp, by_binding, by_tls, protobuf, peak) = {
        let gw = start_gateway(&upstreams).await;
        // Warm up both paths, then alternate so both see the same machine conditions.
        direct(&http, &demo_url, "bench 500 64", 0).await;
        let tls_agents = TLS_SIDES.map(|(_, agent)| agent);
        for agent in BINDINGS
            .map(|(_, _, agent)| agent)
            .iter()
            .chain(&tls_agents)
        {
            via_gateway(&http, &gw, agent, "bench 500 64", 0).await;
        }
        via_gateway_in(Encoding::Protobuf, &http, &gw, AGENT, "bench 500 64", 0).await;
        let flat = Paired::run(
            &http,
            &demo_url,
            &gw,
            format!("bench {n} {k}"),
            n,
            rounds,
            1,
        )
        .await;
        let mut sized = Vec::new();
        for (i, size) in chunk_sizes.iter().enumerate() {
            let load = format!("bench {chunk_n} {size}");
            let first_id = 1_000 * (i + 1);
            sized.push(
                Paired::run(&http, &demo_url, &gw, load, chunk_n, chunk_rounds, first_id).await,
            );
        }
        let paced = format!("bench {paced_n} {k} {rate}");
        let (mut dp, mut gp) = (Vec::new(), Vec::new());
        for id in 100..102 {
            dp.push(direct(&http, &demo_url, &paced, id).await);
            gp.push(via_gateway(&http, &gw, AGENT, &paced, id).await);
        }
        assert!(
            dp.iter().chain(&gp).all(|s| s.events == paced_n),
            "every paced event arrives"
        );
        // The flat-out load once per binding and per side of the TLS comparison per round,
        // all alternating.
        let mut by_binding: Vec<Vec<Sample>> = BINDINGS.iter().map(|_| Vec::new()).collect();
        let mut by_tls: Vec<Vec<Sample>> = TLS_SIDES.iter().map(|_| Vec::new()).collect();
        let mut protobuf = Vec::new();
        for round in 0..binding_rounds {
            // The protobuf encoding first, then JSON-RPC over SSE (`by_binding[0]`): the two
            // sides of the encoding row run back to back in every round.
            let (load, id) = (&flat.load, 3_000 + round);
            let sample = via_gateway_in(Encoding::Protobuf, &http, &gw, AGENT, load, id).await;
            assert_eq!(
                sample.events, n,
                "every event of `{}` in protobuf",
                flat.load
            );
            protobuf.push(sample);
            let bindings = by_binding.iter_mut().zip(BINDINGS.map(|(_, _, a)| a));
            let tls_sides = by_tls.iter_mut().zip(tls_agents);
            for (samples, agent) in bindings.chain(tls_sides) {
                let sample = via_gateway(&http, &gw, agent, &flat.load, 2_000 + round).await;
                assert_eq!(
                    sample.events, n,
                    "every event of `{}` over {agent}",
                    flat.load
                );
                samples.push(sample);
            }
        }
        let peak = rss_kib(gw.pid(), "VmHWM:");
        (flat, sized, dp, gp, by_binding, by_tls, protobuf, peak)
    };
    // `idle S` sends nothing after its working status; `slow N` ticks every 100 ms. Both
    // outlast the measurement, which then closes its connections.
    let (idle_load, slow_load) = ("idle 120".to_owned(), "slow 1200".to_owned());
    let idle_of = |agent| {
        let (http, upstreams, load) = (&http, &upstreams, idle_load.clone());
        async move {
            let gw = start_gateway(upstreams).await;
            OpenStreams::measure(http, gw, agent, "idle", load, 0.0, idle_streams).await
        }
    };
    let idle = idle_of(AGENT).await;
    let ticking = OpenStreams::measure(
        &http,
        start_gateway(&upstreams).await,
        AGENT,
        "ticking",
        slow_load,
        10.0,
        ticking_streams,
    )
    .await;
    let mut idle_by_binding = vec![idle.per_stream_kib()];
    for (_, _, agent) in &BINDINGS[1..] {
        idle_by_binding.push(idle_of(agent).await.per_stream_kib());
    }
    let idle_tls = idle_of(TLS_SIDES[1].1).await.per_stream_kib();
    let comparison = match baseline::binary() {
        Some(binary) => {
            let load = baseline::Load {
                text: &flat.load,
                events: n,
                upstream_per_run: flat.direct[0].frames as f64,
                rounds,
            };
            let compared = baseline::Comparison::run(
                &http,
                &upstreams,
                binary,
                load,
                idle_streams,
                ticks_per_s,
            );
            Some(compared.await)
        }
        None => None,
    };

    let (ds, gs) = (summarize(&flat.direct), summarize(&flat.gateway));
    let (dps, gps) = (summarize(&dp), summarize(&gp));
    let cores = std::thread::available_parallelism().map_or(0, |p| p.get());
    let flat_load = &flat.load;
    println!("\nagui-a2a-gateway benchmark ({cores} cores). Flat out (as fast as the agent can): `{flat_load}`, {rounds} alternating rounds per path, medians (ratios: median of per-round ratios); chunk sizes {chunk_sizes:?}: `bench {chunk_n} <size>`, {chunk_rounds} rounds each. Latency: `bench {paced_n} {k} {rate}` ({rate} events/s), 2 rounds per path, all events. The demo agent (upstream), the gateway and the readers run in three processes.");
    if ticks_assumed {
        println!("(`getconf CLK_TCK` could not be read: CPU times assume 100 clock ticks/s.)");
    }
    println!();
    println!("| metric | direct A2A | via gateway | gateway vs direct |");
    println!("|---|---:|---:|---:|");
    println!(
        "| events/s, flat out (`{flat_load}`) | {:.0} | {:.0} | {:.2}x |",
        ds.events_per_s,
        gs.events_per_s,
        gs.events_per_s / ds.events_per_s
    );
    for p in std::iter::once(&flat).chain(&sized) {
        let (d, g) = (summarize(&p.direct), summarize(&p.gateway));
        let load = &p.load;
        println!(
            "| time to last event, flat out `{load}` (ms) | {:.1} | {:.1} | {:.2}x |",
            d.last_ms,
            g.last_ms,
            p.last_event_ratio()
        );
        println!(
            "| gateway CPU (user + sys) per A2A event, `{load}` (us) | - | {:.2} | |",
            p.cpu_us_per_event(ticks_per_s)
        );
        println!(
            "| bytes read per run, `{load}` (A2A in, AG-UI out; KiB) | {:.0} | {:.0} | {:.2} AG-UI bytes per A2A byte |",
            d.bytes as f64 / p.direct.len() as f64 / 1024.0,
            g.bytes as f64 / p.gateway.len() as f64 / 1024.0,
            g.bytes as f64 / d.bytes as f64
        );
    }
    println!(
        "| SSE events per run, `{flat_load}` | {} | {} | {:.2} AG-UI events per A2A event |",
        ds.frames / flat.direct.len(),
        gs.frames / flat.gateway.len(),
        gs.frames as f64 / ds.frames as f64
    );
    println!(
        "| time to last event, paced (ms) | {:.1} | {:.1} | {:.2}x |",
        dps.last_ms,
        gps.last_ms,
        gps.last_ms / dps.last_ms
    );
    println!(
        "| latency per event p50, paced (us) | {:.0} | {:.0} | {:+.0} us |",
        dps.p50,
        gps.p50,
        gps.p50 - dps.p50
    );
    println!(
        "| latency per event p99, paced (us) | {:.0} | {:.0} | {:+.0} us |",
        dps.p99,
        gps.p99,
        gps.p99 - dps.p99
    );
    println!(
        "| gateway peak RSS over the loads above (MiB) | - | {:.1} | |",
        peak as f64 / 1024.0
    );
    println!(
        "| gateway RSS, idle after one run (MiB) | - | {:.1} | |",
        idle.idle_kib as f64 / 1024.0
    );
    idle.table_rows();
    ticking.table_rows();

    // The bindings side by side: the same flat-out load, the same idle streams.
    let upstream_per_run = flat.direct[0].frames as f64;
    let cpu_of = |samples: &Vec<Sample>| {
        let ticks: u64 = samples.iter().map(|s| s.cpu_ticks).sum();
        ticks as f64 / ticks_per_s * 1e6 / (upstream_per_run * samples.len() as f64)
    };
    let last_ms_of = |samples: &Vec<Sample>| summarize(samples).last_ms;
    let cpu: Vec<f64> = by_binding.iter().map(cpu_of).collect();
    let last_ms: Vec<f64> = by_binding.iter().map(last_ms_of).collect();
    let versus = |x: f64, base: f64| format!("{:.2}x JSON-RPC", x / base);
    for (i, (label, _, _)) in BINDINGS.iter().enumerate() {
        println!(
            "| gateway CPU per A2A event over {label}, `{flat_load}`, {binding_rounds} rounds (us) | - | {:.2} | {} |",
            cpu[i],
            versus(cpu[i], cpu[0])
        );
    }
    // AG-UI's two encodings, the same load over JSON-RPC.
    let (sse, proto) = (cpu[0], cpu_of(&protobuf));
    println!(
        "| gateway CPU per A2A event, AG-UI protobuf encoding, `{flat_load}`, {binding_rounds} rounds (us) | - | {proto:.2} | {:.2}x SSE ({sse:.2}) |",
        proto / sse
    );
    let per_run = |samples: &Vec<Sample>| summarize(samples).bytes as f64 / samples.len() as f64;
    let (sse_bytes, proto_bytes) = (per_run(&by_binding[0]), per_run(&protobuf));
    println!(
        "| AG-UI bytes per run, protobuf encoding, `{flat_load}` | - | {proto_bytes:.0} | {:.2}x SSE |",
        proto_bytes / sse_bytes
    );
    for (i, (label, _, _)) in BINDINGS.iter().enumerate() {
        println!(
            "| time to last event over {label}, `{flat_load}` (ms) | - | {:.1} | {} |",
            last_ms[i],
            versus(last_ms[i], last_ms[0])
        );
    }
    for (i, (label, _, _)) in BINDINGS.iter().enumerate() {
        match (idle_by_binding[i], idle_by_binding[0]) {
            (Some(kib), Some(base)) => println!(
                "| memory per open idle stream over {label}, {idle_streams} streams (KiB) | - | {kib:.1} | {} |",
                versus(kib, base)
            ),
            (Some(kib), None) => println!(
                "| memory per open idle stream over {label}, {idle_streams} streams (KiB) | - | {kib:.1} | |"
            ),
            (None, _) => println!(
                "| memory per open idle stream over {label} (KiB) | - | n/a | not every stream stayed open |"
            ),
        }
    }

    // TLS against plain http, from the same agent process.
    let tls_cpu: Vec<f64> = by_tls.iter().map(cpu_of).collect();
    let tls_last_ms: Vec<f64> = by_tls.iter().map(last_ms_of).collect();
    let versus_plain = |x: f64, base: f64| format!("{:.2}x plain http", x / base);
    for (i, (label, _)) in TLS_SIDES.iter().enumerate() {
        println!(
            "| gateway CPU per A2A event over {label}, `{flat_load}`, {binding_rounds} rounds (us) | - | {:.2} | {} |",
            tls_cpu[i],
            versus_plain(tls_cpu[i], tls_cpu[0])
        );
    }
    for (i, (label, _)) in TLS_SIDES.iter().enumerate() {
        println!(
            "| time to last event over {label}, `{flat_load}` (ms) | - | {:.1} | {} |",
            tls_last_ms[i],
            versus_plain(tls_last_ms[i], tls_last_ms[0])
        );
    }
    let label = TLS_SIDES[1].0;
    match (idle_tls, idle_by_binding[0]) {
        (Some(kib), Some(base)) => println!(
            "| memory per open idle stream over {label}, {idle_streams} streams (KiB) | - | {kib:.1} | {} |",
            versus(kib, base)
        ),
        (Some(kib), None) => println!(
            "| memory per open idle stream over {label}, {idle_streams} streams (KiB) | - | {kib:.1} | |"
        ),
        (None, _) => println!(
            "| memory per open idle stream over {label} (KiB) | - | n/a | not every stream stayed open |"
        ),
    }
    if let Some(comparison) = comparison {
        comparison.print();
    }
}
