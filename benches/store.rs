//! Benchmark: what the binding store costs a run, for each store a replica may use, measured in
//! one run against the in-memory store. Prints one Markdown table: the gateway's CPU time per
//! run and the time to `RUN_STARTED` (p50/p99) with the store in memory, on a plain Redis, on a
//! Redis over TLS (a test CA, `tls.ca_file`) and on a three-master Redis Cluster; each
//! Redis row's figures beside memory's (added time) and plain Redis's (ratio). Not a test:
//! nothing here fails on a number.
//!
//! `cargo bench --bench store`. Env: BENCH_STORE_RUNS (200) runs per store per round,
//! BENCH_STORE_ROUNDS (5) rounds, the stores alternating within each round.
//!
//! Every run is a new thread without state, so it costs the store what a first turn does: one
//! lookup before `RUN_STARTED` (a miss), then the binding, the thread record and the context's
//! owner written. The store is touched per run, never per event (docs/operations.md#managed-redis):
//! the load is `echo hi`, a short answer, so the per-run cost is not hidden by streaming.
//! Each store has a gateway process of its own (the release binary), the demo agent another
//! (`--demo`), shared by all; CPU time is the gateway's utime + stime (/proc/<pid>/stat) over
//! its runs. Needs Debian's `redis-server` and `redis-cli` (`scripts/test` installs them).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

#[path = "support.rs"]
mod support;

use support::{clock_ticks_per_s, cpu_ticks, env_or, free_port, percentile, write_test_pki};

/// A process killed on drop.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A redis-server on a free port (no persistence), with `extra` arguments.
fn redis(dir: &Path, extra: &[String]) -> (Process, u16) {
    let port = free_port();
    std::fs::create_dir_all(dir).unwrap();
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--dir", &dir.display().to_string()])
        .args(["--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server (Debian: apt-get install redis-server)");
    (Process(child), port)
}

fn redis_cli(args: &[String]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .output()
        .expect("redis-cli (Debian: apt-get install redis-tools)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until `redis-cli ... PING` answers.
fn wait_redis(args: &[String]) {
    for _ in 0..200 {
        let mut ping = args.to_vec();
        ping.push("PING".into());
        if redis_cli(&ping).contains("PONG") {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("redis did not answer {args:?}");
}

/// A three-master Redis Cluster (no replicas): its processes and the first node's port.
fn cluster(dir: &Path) -> (Vec<Process>, u16) {
    let nodes: Vec<(Process, u16)> = (0..3)
        .map(|i| {
            let port_dir = dir.join(format!("node{i}"));
            let bus = free_port();
            redis(
                &port_dir,
                &[
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-config-file".into(),
                    port_dir.join("nodes.conf").display().to_string(),
                    "--cluster-port".into(),
                    bus.to_string(),
                ],
            )
        })
        .collect();
    for (_, port) in &nodes {
        wait_redis(&["-p".into(), port.to_string()]);
    }
    let mut create: Vec<String> = vec!["--cluster".into(), "create".into()];
    create.extend(nodes.iter().map(|(_, p)| format!("127.0.0.1:{p}")));
    create.push("--cluster-yes".into());
    redis_cli(&create);
    let first = nodes[0].1;
    for _ in 0..400 {
        if nodes.iter().all(|(_, p)| {
            redis_cli(&["-p".into(), p.to_string(), "CLUSTER".into(), "INFO".into()])
                .contains("cluster_state:ok")
        }) {
            return (nodes.into_iter().map(|(p, _)| p).collect(), first);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("the benchmark's cluster did not form");
}

/// A gateway process on `store` (the `binding_store` YAML value) in front of the demo agent.
async fn gateway(dir: &Path, name: &str, store: &str, demo: &str) -> (Process, String) {
    let port = free_port();
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!("binding_store: {store}\nagents:\n  - {{name: demo, url: '{demo}'}}\n"),
    )
    .unwrap();
    let process = Process(
        Command::new(env!("CARGO_BIN_EXE_agui-a2a-gateway"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--config", &config.display().to_string()])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the gateway"),
    );
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        if let Ok(r) = reqwest::get(format!("{base}/readyz")).await {
            let body: serde_json::Value = r.json().await.unwrap_or_default();
            if body["status"] == "ready" {
                return (process, base);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the {name} gateway did not become ready (its store answers?)");
}

/// One run on a new thread: the time to `RUN_STARTED`, after the whole stream was read.
async fn one_run(http: &reqwest::Client, base: &str, id: &str) -> Duration {
    let body = json!({"threadId": id, "runId": format!("r-{id}"),
        "messages": [{"id": format!("m-{id}"), "role": "user", "content": "echo hi"}]});
    let started = Instant::now();
    let resp = http
        .post(format!("{base}/agents/demo"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream();
    let (mut seen, mut to_start, mut text) = (false, Duration::ZERO, String::new());
    while let Some(chunk) = stream.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        if !seen && text.contains("RUN_STARTED") {
            (seen, to_start) = (true, started.elapsed());
        }
    }
    assert!(
        text.contains("RUN_FINISHED"),
        "a run did not finish: {text}"
    );
    to_start
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs = env_or("BENCH_STORE_RUNS", 200);
    let rounds = env_or("BENCH_STORE_ROUNDS", 5);
    let dir = std::env::temp_dir().join(format!("agui-store-bench-{}", std::process::id()));
    let (ca, cert, key) = write_test_pki(&dir.join("tls"));
    let (_plain, plain_port) = redis(&dir.join("plain"), &[]);
    let (_tls, tls_port) = {
        let tls_port = free_port();
        let s = |p: &PathBuf| p.display().to_string();
        let (p, _) = redis(
            &dir.join("tls"),
            &[
                "--tls-port".into(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                s(&cert),
                "--tls-key-file".into(),
                s(&key),
                "--tls-ca-cert-file".into(),
                s(&ca),
                "--tls-auth-clients".into(),
                "no".into(),
            ],
        );
        (p, tls_port)
    };
    wait_redis(&["-p".into(), plain_port.to_string()]);
    wait_redis(&[
        "--tls".into(),
        "--cacert".into(),
        ca.display().to_string(),
        "-p".into(),
        tls_port.to_string(),
    ]);
    let (_cluster, cluster_port) = cluster(&dir.join("cluster"));
    let (demo, demo_url) = support::spawn_demo_agent();
    let _demo = Process(demo);

    let stores = [
        ("memory", "memory".to_owned()),
        ("Redis", format!("redis://127.0.0.1:{plain_port}/0")),
        (
            "Redis over TLS",
            format!(
                "{{url: 'rediss://127.0.0.1:{tls_port}/0', tls: {{ca_file: '{}'}}}}",
                ca.display()
            ),
        ),
        (
            "Redis Cluster (3 masters)",
            format!("{{mode: cluster, nodes: ['127.0.0.1:{cluster_port}']}}"),
        ),
    ];
    let mut gateways = Vec::new();
    for (i, (name, store)) in stores.iter().enumerate() {
        let (process, base) = gateway(&dir, &format!("gw{i}"), store, &demo_url).await;
        gateways.push((*name, process, base));
    }
    let http = reqwest::Client::new();
    // Warm-up: connections made, code paged in.
    for (name, _, base) in &gateways {
        for i in 0..20 {
            one_run(&http, base, &format!("warm-{name}-{i}")).await;
        }
    }
    let mut starts: Vec<Vec<f64>> = vec![Vec::new(); gateways.len()];
    let mut ticks = vec![0u64; gateways.len()];
    for round in 0..rounds {
        for (g, (name, process, base)) in gateways.iter().enumerate() {
            let before = cpu_ticks(process.0.id());
            for i in 0..runs {
                let id = format!("{name}-{round}-{i}-{}", std::process::id());
                let t = one_run(&http, base, &id).await;
                starts[g].push(t.as_secs_f64() * 1000.0);
            }
            ticks[g] += cpu_ticks(process.0.id()).saturating_sub(before);
        }
    }
    let (per_s, _) = clock_ticks_per_s();
    let total_runs = (runs * rounds) as f64;
    let rows: Vec<(f64, f64, f64)> = starts
        .iter_mut()
        .zip(&ticks)
        .map(|(s, t)| {
            s.sort_by(f64::total_cmp);
            let cpu_us = *t as f64 / per_s / total_runs * 1e6;
            (cpu_us, percentile(s, 0.5), percentile(s, 0.99))
        })
        .collect();
    let (mem, plain) = (rows[0], rows[1]);
    println!(
        "\nStore cost per run (a new thread: one lookup before RUN_STARTED, then three writes), {} runs per store over {rounds} alternating rounds; load {}\n",
        runs * rounds,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    println!("| store | gateway CPU per run (µs) | added vs memory (µs) | vs plain Redis | to RUN_STARTED p50 / p99 (ms) | added p50 / p99 vs memory (ms) | added p50 vs plain Redis's |");
    println!("|---|---|---|---|---|---|---|");
    for ((name, _, _), (cpu, p50, p99)) in gateways.iter().zip(&rows) {
        let added = (p50 - mem.1, p99 - mem.2);
        let plain_added = plain.1 - mem.1;
        let ratio = |x: f64, base: f64| {
            if *name == "memory" || base <= 0.0 {
                "—".to_owned()
            } else {
                format!("{:.2}×", x / base)
            }
        };
        println!(
            "| {name} | {cpu:.0} | {:.0} | {} | {p50:.2} / {p99:.2} | {:.2} / {:.2} | {} |",
            cpu - mem.0,
            ratio(*cpu, plain.0),
            added.0,
            added.1,
            ratio(added.0, plain_added),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
