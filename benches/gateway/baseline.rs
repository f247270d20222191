//! The A/B comparison with another gateway binary (`BENCH_BASELINE_GATEWAY`, the benchmark's
//! header): this build's gateway against the baseline's, on the same upstreams with the same
//! config, in one run. The headline flat-out load goes through both in alternating rounds
//! (which goes first swapped every round, so neither always meets a machine the other just
//! warmed or loaded): the gateway CPU per A2A event and the time to the last event of each.
//! Then the memory per open idle stream, on a fresh gateway of each, alternating the same
//! way ([`OpenStreams`]). Printed side by side, with this build's ratio to the baseline.

use std::path::{Path, PathBuf};

use super::support::env_or;
use super::{
    gateway_config, median, spawn_gateway, spawn_gateway_binary, summarize, via_gateway, Gateway,
    OpenStreams, Sample, Upstreams, AGENT,
};

/// The two sides, as the table names them; a side is an index into this.
const SIDES: [&str; 2] = ["this build", "baseline"];

/// The baseline binary, if `BENCH_BASELINE_GATEWAY` names one.
pub(crate) fn binary() -> Option<PathBuf> {
    std::env::var_os("BENCH_BASELINE_GATEWAY").map(PathBuf::from)
}

/// What the flat-out load costs through a side.
pub(crate) struct Load<'a> {
    /// The load, as the agent reads it (`bench N K`).
    pub(crate) text: &'a str,
    /// Its events as they reach the reader.
    pub(crate) events: usize,
    /// Its A2A events per run, as the direct read counts them.
    pub(crate) upstream_per_run: f64,
    pub(crate) rounds: usize,
}

/// Both sides' figures, in [`SIDES`] order.
pub(crate) struct Comparison {
    baseline: PathBuf,
    load: String,
    rounds: usize,
    cpu_us_per_event: [f64; 2],
    last_ms: [f64; 2],
    idle_streams: usize,
    idle_rounds: usize,
    /// The median over the rounds in which every stream stayed open (`None`: none did).
    idle_kib: [Option<f64>; 2],
}

/// The side's gateway, with the benchmark's config.
async fn start(side: usize, baseline: &Path, up: &Upstreams) -> Gateway {
    let yaml = gateway_config(up);
    match side {
        0 => spawn_gateway(&yaml).await,
        _ => spawn_gateway_binary(baseline, &yaml).await,
    }
}

/// The sides in a round's order: swapped every round.
fn order(round: usize) -> [usize; 2] {
    if round.is_multiple_of(2) {
        [0, 1]
    } else {
        [1, 0]
    }
}

impl Comparison {
    pub(crate) async fn run(
        http: &reqwest::Client,
        up: &Upstreams,
        baseline: PathBuf,
        load: Load<'_>,
        idle_streams: usize,
        ticks_per_s: f64,
    ) -> Self {
        let idle_rounds = env_or("BENCH_BASELINE_IDLE_ROUNDS", 1);
        let gateways = [start(0, &baseline, up).await, start(1, &baseline, up).await];
        for gw in &gateways {
            via_gateway(http, gw, AGENT, "bench 500 64", 0).await;
        }
        let mut samples: [Vec<Sample>; 2] = Default::default();
        for round in 0..load.rounds {
            for side in order(round) {
                // A thread of its own per side and round: no run picks up another's context.
                let id = 3_000 + 2 * round + side;
                let sample = via_gateway(http, &gateways[side], AGENT, load.text, id).await;
                let (text, name) = (load.text, SIDES[side]);
                assert_eq!(
                    sample.events, load.events,
                    "every event of `{text}` via {name}"
                );
                samples[side].push(sample);
            }
        }
        drop(gateways);
        let cpu_us_per_event = samples.each_ref().map(|s| {
            let ticks: u64 = s.iter().map(|s| s.cpu_ticks).sum();
            ticks as f64 / ticks_per_s * 1e6 / (load.upstream_per_run * s.len() as f64)
        });
        let last_ms = samples.each_ref().map(|s| summarize(s).last_ms);
        let mut idle: [Vec<f64>; 2] = Default::default();
        for round in 0..idle_rounds {
            for side in order(round) {
                let gw = start(side, &baseline, up).await;
                let load = "idle 120".to_owned();
                let open = OpenStreams::measure(http, gw, AGENT, "idle", load, 0.0, idle_streams);
                idle[side].extend(open.await.per_stream_kib());
            }
        }
        Self {
            baseline,
            load: load.text.to_owned(),
            rounds: load.rounds,
            cpu_us_per_event,
            last_ms,
            idle_streams,
            idle_rounds,
            idle_kib: idle.map(|kib| (!kib.is_empty()).then(|| median(kib))),
        }
    }

    pub(crate) fn print(&self) {
        let (load, rounds) = (&self.load, self.rounds);
        println!(
            "\nA/B: this build's gateway against the baseline `{}`, the same upstreams and config, in one run; rounds alternate, the side that goes first swapped every round.\n",
            self.baseline.display()
        );
        println!("| metric | this build | baseline | this build vs baseline |");
        println!("|---|---:|---:|---:|");
        let row = |metric: String, [this, base]: [f64; 2]| {
            println!("| {metric} | {this:.2} | {base:.2} | {:.2}x |", this / base)
        };
        row(
            format!("gateway CPU (user + sys) per A2A event, `{load}`, {rounds} rounds (us)"),
            self.cpu_us_per_event,
        );
        row(
            format!("time to last event, `{load}`, median of {rounds} rounds (ms)"),
            self.last_ms,
        );
        let (n, idle_rounds) = (self.idle_streams, self.idle_rounds);
        let metric = format!(
            "memory per open idle stream, {n} streams, median of {idle_rounds} fresh gateways each (KiB)"
        );
        match self.idle_kib {
            [Some(this), Some(base)] => row(metric, [this, base]),
            [this, base] => {
                let shown = |kib: Option<f64>| kib.map_or("n/a".to_owned(), |k| format!("{k:.2}"));
                println!(
                    "| {metric} | {} | {} | not every stream stayed open |",
                    shown(this),
                    shown(base)
                );
            }
        }
    }
}
