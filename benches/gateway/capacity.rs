//! The capacity mode (`cargo bench --bench gateway -- capacity`, docs/operations.md#capacity):
//! what one gateway replica holds with a p99 added latency per event of at most
//! [`ADDED_P99_US`], stepping each load up until it no longer does (the knee), and its memory
//! with many idle streams open. Three loads, each on the same gateway (the demo agent as
//! upstream, JSON-RPC, `cancel_on_disconnect: true` so closed streams stop ticking):
//!
//! - events/s: [`PACED_STREAMS`] paced `bench` streams at the step's total rate, read
//!   directly and then through the gateway (every event is stamped by the agent: the latency
//!   is per event, the same measure as the main table's);
//! - open streams: the step's count of `slow` streams through the gateway (a tick every
//!   100 ms each, like a chat streaming tokens), with a [`probe`] read directly and through
//!   the gateway while they are open;
//! - runs/s: `echo hi` runs (one word, 20 ms in the agent) started at the step's rate
//!   through the gateway, open loop, with the probe alongside.
//!
//! A step holds when every event and run arrived, the load kept its pace (the agent and the
//! readers share the machine), the direct p99 is at most [`DIRECT_P99_MAX_US`] (above it the
//! machine is saturated and the difference means nothing), and the p99 through the gateway
//! is within [`ADDED_P99_US`] of the direct p99; a step that does not is tried once more. The knee is the last step that holds before the first that does not; a
//! load stops after two steps in a row do not. Memory: the gateway's RSS with
//! `BENCH_CAPACITY_IDLE` (1,000 and 10,000) open `idle` streams, each count on a fresh
//! gateway, as [`OpenStreams`] measures it. The file-descriptor limit of every process is
//! raised (`prlimit`) where that is allowed; a count the limit cannot hold (two of the
//! gateway's descriptors a stream) is measured at the most it holds, and printed so. Env overrides: BENCH_CAPACITY_EVENTS,
//! BENCH_CAPACITY_STREAMS, BENCH_CAPACITY_RUNS (comma-separated steps), BENCH_CAPACITY_IDLE.
//! Prints tables; never fails on a number.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    cpu_ticks, direct, rss_kib, run_input, spawn_gateway, start_demo_agent, summarize, via_gateway,
    Gateway, OpenStreams, Sample, Watch, BENCH_LIMITS,
};

/// The latency budget: p99 added per event.
const ADDED_P99_US: f64 = 1_000.0;

/// A step whose direct read has a p99 above this saturated the machine (the agent, the
/// readers, whatever else runs): the difference says nothing of the gateway, and the step
/// does not hold.
const DIRECT_P99_MAX_US: f64 = 5_000.0;

/// The demo agent runs at most 16 benches at once: the events/s load uses them all.
const PACED_STREAMS: usize = 16;

/// Each step of the events/s load lasts this long per path.
const PACED_SECS: u32 = 2;

/// Each load is read this many times per path, alternating direct and through the gateway;
/// the p99 is over every event of a path's rounds.
const ROUNDS: usize = 2;

/// The probe beside the open streams and the runs: this many paced `bench` streams, at this
/// rate each, for [`PACED_SECS`], per path and round (the main table's paced 2,000 events/s).
const PROBE_STREAMS: usize = 4;
const PROBE_RATE_EACH: u32 = 500;

/// The agent every load uses.
const AGENT: &str = "capacity";

/// Ids no other run of this process uses (threads, messages).
static NEXT_ID: AtomicUsize = AtomicUsize::new(1_000_000);

fn next_id() -> usize {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn steps(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

/// Raises the open-file limit of process `pid` to `to` (`prlimit`, which needs the right
/// to raise a hard limit); whether it did.
fn raise_nofile(pid: u32, to: u64) -> bool {
    std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={to}:{to}")])
        .status()
        .is_ok_and(|s| s.success())
}

/// The open-file limit of process `pid` (its soft limit, /proc/<pid>/limits).
fn nofile(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

const NOFILE: u64 = 65_536;

async fn start_capacity_gateway(demo_url: &str) -> Gateway {
    let gw = spawn_gateway(&format!(
        "{BENCH_LIMITS}agents:\n  - {{name: {AGENT}, url: '{demo_url}', binding: jsonrpc, cancel_on_disconnect: true}}\n"
    ))
    .await;
    raise_nofile(gw.pid(), NOFILE);
    gw
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Direct,
    Gateway,
}

/// `streams` paced benches of `rate_each` events/s for `secs`, all at once, read `via`.
async fn paced(
    http: &reqwest::Client,
    demo_url: &str,
    gw: &Gateway,
    via: Via,
    streams: usize,
    rate_each: u32,
    secs: u32,
) -> Vec<Sample> {
    let load = format!("bench {} 100 {rate_each}", rate_each * secs);
    let reads = (0..streams).map(|_| {
        let (load, id) = (load.clone(), next_id());
        async move {
            match via {
                Via::Direct => direct(http, demo_url, &load, id).await,
                Via::Gateway => via_gateway(http, gw, AGENT, &load, id).await,
            }
        }
    });
    futures::future::join_all(reads).await
}

/// Every event of every sample arrived, and the last within 10 % (+ 200 ms) of the load's
/// nominal length: the paced load kept its pace.
fn kept_pace(samples: &[Sample], events_each: usize, secs: u32) -> bool {
    let bound = Duration::from_secs_f64(f64::from(secs) * 1.1 + 0.2);
    samples
        .iter()
        .all(|s| s.events == events_each && s.last_event <= bound)
}

/// The p99 per event of `samples` (µs).
fn p99(samples: &[Sample]) -> f64 {
    summarize(samples).p99
}

/// [`ROUNDS`] of `streams` paced benches at `rate_each`, alternating direct and through the
/// gateway: (direct samples, gateway samples, the gateway's CPU ticks and seconds over its
/// rounds).
async fn alternate(
    http: &reqwest::Client,
    demo_url: &str,
    gw: &Gateway,
    streams: usize,
    rate_each: u32,
) -> (Vec<Sample>, Vec<Sample>, (u64, f64)) {
    let (mut d, mut g, mut cpu) = (Vec::new(), Vec::new(), (0, 0.0));
    for _ in 0..ROUNDS {
        d.extend(
            paced(
                http,
                demo_url,
                gw,
                Via::Direct,
                streams,
                rate_each,
                PACED_SECS,
            )
            .await,
        );
        let (ticks, at) = (cpu_ticks(gw.pid()), Instant::now());
        g.extend(
            paced(
                http,
                demo_url,
                gw,
                Via::Gateway,
                streams,
                rate_each,
                PACED_SECS,
            )
            .await,
        );
        cpu.0 += cpu_ticks(gw.pid()).saturating_sub(ticks);
        cpu.1 += at.elapsed().as_secs_f64();
    }
    (d, g, cpu)
}

/// The probe read directly and through the gateway: (direct p99, gateway p99, both kept
/// their pace).
async fn probe(http: &reqwest::Client, demo_url: &str, gw: &Gateway) -> (f64, f64, bool) {
    let each = (PROBE_RATE_EACH * PACED_SECS) as usize;
    let (d, g, _) = alternate(http, demo_url, gw, PROBE_STREAMS, PROBE_RATE_EACH).await;
    let ok = kept_pace(&d, each, PACED_SECS) && kept_pace(&g, each, PACED_SECS);
    (p99(&d), p99(&g), ok)
}

/// One step of a load, as its table row shows it.
struct Step {
    step: usize,
    /// What the load achieved (events/s, streams open, runs/s), as printed.
    achieved: String,
    direct_p99: f64,
    gateway_p99: f64,
    /// The gateway's CPU over the step, in % of one core.
    cpu_pct: f64,
    rss_mib: f64,
    /// Everything arrived at its pace.
    complete: bool,
    note: String,
}

impl Step {
    fn added(&self) -> f64 {
        self.gateway_p99 - self.direct_p99
    }

    fn saturated(&self) -> bool {
        self.direct_p99.is_nan() || self.direct_p99 > DIRECT_P99_MAX_US
    }

    fn holds(&self) -> bool {
        self.complete && !self.saturated() && self.added() <= ADDED_P99_US
    }
}

/// CPU of `pid` in % of one core since `(ticks, at)`.
fn cpu_pct_since(pid: u32, (ticks, at): (u64, Instant), ticks_per_s: f64) -> f64 {
    let used = cpu_ticks(pid).saturating_sub(ticks) as f64 / ticks_per_s;
    used / at.elapsed().as_secs_f64() * 100.0
}

/// Steps `load` over `steps` until two in a row do not hold; a step that does not hold is
/// tried once more first (the machine is shared: one stall of another process's makes a
/// p99).
async fn step_up<F, Fut>(steps: &[usize], mut load: F) -> Vec<Step>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Step>,
{
    let mut done: Vec<Step> = Vec::new();
    for &step in steps {
        let mut s = load(step).await;
        if !s.holds() {
            eprintln!(
                "capacity: step {step} again: added p99 {:+.0} us",
                s.added()
            );
            s = load(step).await;
            s.note = format!("second try; {}", s.note);
        }
        eprintln!(
            "capacity: step {step}: {} added p99 {:+.0} us, {}",
            s.achieved,
            s.added(),
            if s.holds() { "holds" } else { "does not hold" }
        );
        done.push(s);
        let n = done.len();
        if n >= 2 && !done[n - 1].holds() && !done[n - 2].holds() {
            break;
        }
    }
    done
}

/// The last step that holds before the first that does not.
fn knee(steps: &[Step]) -> Option<usize> {
    steps
        .iter()
        .take_while(|s| s.holds())
        .last()
        .map(|s| s.step)
}

fn print_steps(title: &str, unit: &str, steps: &[Step]) {
    println!("\n{title}\n");
    println!("| {unit} | achieved | direct p99 (us) | gateway p99 (us) | added p99 (us) | gateway CPU (% of a core) | gateway RSS (MiB) | holds | |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---|---|");
    for s in steps {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:+.0} | {:.0} | {:.1} | {} | {} |",
            s.step,
            s.achieved,
            s.direct_p99,
            s.gateway_p99,
            s.added(),
            s.cpu_pct,
            s.rss_mib,
            if s.holds() { "yes" } else { "no" },
            if s.saturated() {
                format!(
                    "direct p99 over {DIRECT_P99_MAX_US:.0} us: saturated; {}",
                    s.note
                )
            } else {
                s.note.clone()
            }
        );
    }
}

/// The events/s load at `total` events/s.
async fn events_step(
    http: &reqwest::Client,
    demo_url: &str,
    gw: &Gateway,
    total: usize,
    ticks_per_s: f64,
) -> Step {
    let rate_each = (total / PACED_STREAMS).max(1) as u32;
    let each = (rate_each * PACED_SECS) as usize;
    let (d, g, (ticks, secs)) = alternate(http, demo_url, gw, PACED_STREAMS, rate_each).await;
    let cpu_pct = ticks as f64 / ticks_per_s / secs * 100.0;
    let (d_ok, g_ok) = (
        kept_pace(&d, each, PACED_SECS),
        kept_pace(&g, each, PACED_SECS),
    );
    // Events per second of each stream, summed over the streams of a round.
    let achieved: f64 = g
        .iter()
        .map(|s| s.events as f64 / s.last_event.as_secs_f64())
        .sum::<f64>()
        / ROUNDS as f64;
    let note = match (d_ok, g_ok) {
        (true, true) => String::new(),
        (false, _) => "the direct read did not keep pace (agent or reader saturated)".into(),
        (true, false) => "the gateway did not keep pace".into(),
    };
    Step {
        step: rate_each as usize * PACED_STREAMS,
        achieved: format!("{achieved:.0} events/s"),
        direct_p99: p99(&d),
        gateway_p99: p99(&g),
        cpu_pct,
        rss_mib: rss_kib(gw.pid(), "VmRSS:") as f64 / 1024.0,
        complete: d_ok && g_ok,
        note,
    }
}

/// The open-streams load: `count` ticking streams through the gateway, and the probe.
async fn streams_step(
    http: &reqwest::Client,
    demo_url: &str,
    gw: &Gateway,
    count: usize,
    ticks_per_s: f64,
) -> Step {
    let watches: Vec<Arc<Watch>> = (0..count).map(|_| Arc::default()).collect();
    let url = format!("{}/agents/{AGENT}", gw.base);
    let followers: Vec<_> = watches
        .iter()
        .map(|w| {
            let (w, http, url) = (w.clone(), http.clone(), url.clone());
            let body = run_input(&format!("ticking-{}", next_id()), "slow 1200");
            tokio::spawn(async move { w.follow(http, url, body).await })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !watches.iter().all(|w| w.settled()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let chunks = || -> usize {
        watches
            .iter()
            .map(|w| w.chunks.load(Ordering::SeqCst))
            .sum()
    };
    let (before, window) = (chunks(), Instant::now());
    let cpu = (cpu_ticks(gw.pid()), Instant::now());
    let (direct_p99, gateway_p99, probe_ok) = probe(http, demo_url, gw).await;
    let cpu_pct = cpu_pct_since(gw.pid(), cpu, ticks_per_s);
    let chunks_per_s = (chunks() - before) as f64 / window.elapsed().as_secs_f64();
    let rss_mib = rss_kib(gw.pid(), "VmRSS:") as f64 / 1024.0;
    let open = watches.iter().filter(|w| w.open()).count();
    for f in followers {
        f.abort();
    }
    // The closed streams' tasks are cancelled upstream; let that settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let nominal = 10.0 * count as f64;
    let paced = chunks_per_s >= 0.9 * nominal;
    let mut notes = Vec::new();
    if open != count {
        notes.push(format!("only {open} of {count} open"));
    }
    if !paced {
        notes.push(format!("ticks {chunks_per_s:.0}/s of {nominal:.0}/s"));
    }
    if !probe_ok {
        notes.push("the probe did not keep pace".into());
    }
    Step {
        step: count,
        achieved: format!("{open} open, {chunks_per_s:.0} events/s"),
        direct_p99,
        gateway_p99,
        cpu_pct,
        rss_mib,
        complete: open == count && paced && probe_ok,
        note: notes.join("; "),
    }
}

/// What the runs of a runs/s step did.
#[derive(Default)]
struct RunTally {
    started: AtomicUsize,
    finished: AtomicUsize,
    failed: AtomicUsize,
    /// Each finished run's time from request to `RUN_FINISHED`, µs.
    durations: std::sync::Mutex<Vec<f64>>,
}

/// One `echo hi` run through the gateway, read to its end.
async fn one_run(http: reqwest::Client, url: String, tally: Arc<RunTally>) {
    let started = Instant::now();
    let body = run_input(&format!("run-{}", next_id()), "echo hi");
    let ok = match http.post(url).json(&body).send().await {
        Ok(resp) if resp.status().is_success() => resp
            .text()
            .await
            .is_ok_and(|t| t.contains(r#""type":"RUN_FINISHED""#)),
        _ => false,
    };
    if ok {
        tally.finished.fetch_add(1, Ordering::SeqCst);
        let us = started.elapsed().as_secs_f64() * 1e6;
        tally.durations.lock().expect("not poisoned").push(us);
    } else {
        tally.failed.fetch_add(1, Ordering::SeqCst);
    }
}

/// The runs/s load: runs started at `rate` per second through the gateway (open loop) for
/// a second, then through the probe, then stopped; the runs still going are awaited.
async fn runs_step(
    http: &reqwest::Client,
    demo_url: &str,
    gw: &Gateway,
    rate: usize,
    ticks_per_s: f64,
) -> Step {
    let tally = Arc::new(RunTally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let url = format!("{}/agents/{AGENT}", gw.base);
    let starter = {
        let (tally, stop, http) = (tally.clone(), stop.clone(), http.clone());
        tokio::spawn(async move {
            let period = Duration::from_secs_f64(1.0 / rate as f64);
            let mut tick = tokio::time::interval(period);
            let mut runs = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                tick.tick().await;
                tally.started.fetch_add(1, Ordering::SeqCst);
                runs.push(tokio::spawn(one_run(
                    http.clone(),
                    url.clone(),
                    tally.clone(),
                )));
            }
            runs
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (started_before, window) = (tally.started.load(Ordering::SeqCst), Instant::now());
    let cpu = (cpu_ticks(gw.pid()), Instant::now());
    let (direct_p99, gateway_p99, probe_ok) = probe(http, demo_url, gw).await;
    let cpu_pct = cpu_pct_since(gw.pid(), cpu, ticks_per_s);
    let started_rate = (tally.started.load(Ordering::SeqCst) - started_before) as f64
        / window.elapsed().as_secs_f64();
    let rss_mib = rss_kib(gw.pid(), "VmRSS:") as f64 / 1024.0;
    stop.store(true, Ordering::SeqCst);
    let runs = starter.await.expect("the starter");
    let started_at = Instant::now();
    for run in runs {
        let left = Duration::from_secs(30).saturating_sub(started_at.elapsed());
        let _ = tokio::time::timeout(left, run).await;
    }
    let (started, finished, failed) = (
        tally.started.load(Ordering::SeqCst),
        tally.finished.load(Ordering::SeqCst),
        tally.failed.load(Ordering::SeqCst),
    );
    let mut durations = std::mem::take(&mut *tally.durations.lock().expect("not poisoned"));
    durations.sort_by(f64::total_cmp);
    let run_p99_ms = super::percentile(&durations, 0.99) / 1e3;
    let kept = started_rate >= 0.95 * rate as f64;
    let mut notes = vec![format!("run p99 {run_p99_ms:.1} ms")];
    if finished != started {
        notes.push(format!("{finished} of {started} finished, {failed} failed"));
    }
    if !kept {
        notes.push(format!("started {started_rate:.0}/s"));
    }
    if !probe_ok {
        notes.push("the probe did not keep pace".into());
    }
    Step {
        step: rate,
        achieved: format!("{started_rate:.0} runs/s"),
        direct_p99,
        gateway_p99,
        cpu_pct,
        rss_mib,
        complete: finished == started && kept && probe_ok,
        note: notes.join("; "),
    }
}

/// `uptime`'s load averages, as printed.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

pub(super) async fn run(ticks_per_s: f64) {
    let me = std::process::id();
    raise_nofile(me, NOFILE);
    let upstream = start_demo_agent();
    raise_nofile(upstream.pid(), NOFILE);
    let demo_url = upstream.base.clone();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(2048)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let load_before = load_average();
    let started = Instant::now();

    let gw = start_capacity_gateway(&demo_url).await;
    // Warm up both paths.
    paced(&http, &demo_url, &gw, Via::Direct, 2, 500, 1).await;
    paced(&http, &demo_url, &gw, Via::Gateway, 2, 500, 1).await;
    let event_steps = steps(
        "BENCH_CAPACITY_EVENTS",
        &[2_000, 5_000, 10_000, 20_000, 40_000, 80_000],
    );
    let events = step_up(&event_steps, |total| {
        events_step(&http, &demo_url, &gw, total, ticks_per_s)
    })
    .await;
    let stream_steps = steps(
        "BENCH_CAPACITY_STREAMS",
        &[250, 500, 1_000, 2_000, 4_000, 8_000],
    );
    let streams = step_up(&stream_steps, |count| {
        streams_step(&http, &demo_url, &gw, count, ticks_per_s)
    })
    .await;
    let run_steps = steps("BENCH_CAPACITY_RUNS", &[50, 100, 200, 400, 800, 1_600]);
    let runs = step_up(&run_steps, |rate| {
        runs_step(&http, &demo_url, &gw, rate, ticks_per_s)
    })
    .await;
    drop(gw);

    // Over JSON-RPC an open stream takes two of the gateway's file descriptors (client and
    // upstream): a count past what the limit allows is measured at the most it allows.
    let mut idle = Vec::new();
    for count in steps("BENCH_CAPACITY_IDLE", &[1_000, 10_000]) {
        let gw = start_capacity_gateway(&demo_url).await;
        let limit = nofile(gw.pid()).min(nofile(me)).min(nofile(upstream.pid()));
        let fits = usize::try_from(limit.saturating_sub(200) / 2).unwrap_or(usize::MAX);
        let measured = count.min(fits / 100 * 100);
        if measured < count {
            eprintln!("capacity: {count} idle streams need more than {limit} open files; {measured} measured");
        }
        let load = "idle 600".to_owned();
        idle.push(OpenStreams::measure(&http, gw, AGENT, "idle", load, 0.0, measured).await);
    }
    let load_after = load_average();

    let cores = std::thread::available_parallelism().map_or(0, |p| p.get());
    println!("\nagui-a2a-gateway capacity ({cores} cores; the demo agent, the gateway and the readers share them). Load average (1/5/15 min) before: {load_before}; after: {load_after}; {:.0} s. A step holds when every event and run arrived at its pace, the direct p99 per event is at most {DIRECT_P99_MAX_US:.0} us (else the machine is saturated) and the p99 through the gateway is within {ADDED_P99_US:.0} us of it; a step that does not hold is tried once more.", started.elapsed().as_secs_f64());
    print_steps(
        &format!("Events/s: {PACED_STREAMS} paced `bench` streams, {PACED_SECS} s per path"),
        "events/s",
        &events,
    );
    print_steps(
        &format!("Open streams (`slow`, 10 events/s each), probe: {PROBE_STREAMS} x `bench` at {PROBE_RATE_EACH}/s per path"),
        "open streams",
        &streams,
    );
    print_steps(
        "Runs/s (`echo hi`, started open loop), probe alongside",
        "runs/s",
        &runs,
    );
    println!("\n| one replica, p99 added per event <= 1 ms | knee |");
    println!("|---|---:|");
    let show = |k: Option<usize>| k.map_or("below the first step".to_owned(), |k| k.to_string());
    println!("| events/s | {} |", show(knee(&events)));
    println!(
        "| open streams at 10 events/s each | {} |",
        show(knee(&streams))
    );
    println!("| runs/s (`echo hi`) | {} |", show(knee(&runs)));
    for m in &idle {
        let mib = |kib: u64| kib as f64 / 1024.0;
        let per = m
            .per_stream_kib()
            .map_or("n/a".to_owned(), |k| format!("{k:.1} KiB"));
        println!(
            "| gateway RSS with {} open idle streams ({} open when read; idle before: {:.1} MiB; {per} per stream) | {:.1} MiB |",
            m.requested,
            m.open,
            mib(m.idle_kib),
            mib(m.open_kib)
        );
    }
    drop(upstream);
}
