//! The demo agent's scripted scenarios (docs/design.md#2-running-it-and-configuration,
//! `--demo`): the one place a scenario is defined. [`Scenario`] parses the first words of the
//! user's message, generates the help text and the card's description and examples, and plays
//! its steps on a task.
//!
//! Invariants: every scenario is in [`Scenario::catalogue`], and parsing looks commands up
//! there, so what the agent understands, its help text and its card cannot drift apart.
//! Arguments out of range are refused with a reply that names the range, never clamped.
//! `bench` events are progress messages (never recorded in history), and at most
//! [`Scenario::MAX_RUNNING_BENCHES`] benches run at once, each with stream queues sized to
//! [`STREAM_BUFFER_BYTES`], so a burst of large benches cannot pile up memory.

use std::fmt::{self, Write as _};
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::store::{AgentMessage, Update};
use super::{stamp_nanos, Shared};
use crate::a2a::model::TaskState;

/// Bytes of events one stream's queue may hold (bench events can be 1 MiB each).
pub(super) const STREAM_BUFFER_BYTES: usize = 1 << 20;

/// Events one stream's queue holds at most.
const MAX_BUFFER_EVENTS: usize = 256;

/// A scripted scenario, named by the first word of the user's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Scenario {
    /// Streams the text word by word, then completes with all of it.
    Echo(String),
    /// An artifact in three chunks.
    Artifact,
    /// Input-required, then completes with the answer.
    Approve,
    /// Auth-required, then completes with the answer.
    Auth,
    /// Fails.
    Fail,
    /// `n` ticks 100 ms apart.
    Slow { n: u32 },
    /// A quiet working task that completes after `secs` seconds.
    Idle { secs: u64 },
    /// `n` events of `k` bytes, `rate` per second (0: as fast as the reader takes them).
    Bench { n: u32, k: usize, rate: u32 },
}

/// Why a message starts no scenario; either way the answer is a message, not a task.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The first word names no scenario.
    Unknown,
    /// A scenario with arguments out of range; the text says what is allowed.
    Invalid(String),
}

impl Refusal {
    /// The reply to the user.
    pub(super) fn text(&self) -> String {
        match self {
            Refusal::Unknown => Scenario::help(),
            Refusal::Invalid(why) => why.clone(),
        }
    }
}

impl Scenario {
    /// `slow N`: N ≤ this.
    pub(super) const MAX_SLOW_TICKS: u32 = 100_000;
    /// `idle S`: S ≤ this.
    pub(super) const MAX_IDLE_SECS: u64 = 3600;
    /// `bench N K`: N ≤ this.
    pub(super) const MAX_BENCH_EVENTS: u32 = 1_000_000;
    /// `bench N K`: K in this range (the floor fits the send stamp every event starts with).
    pub(super) const BENCH_BYTES: RangeInclusive<usize> = 40..=1 << 20;
    /// `bench N K R`: R ≤ this.
    pub(super) const MAX_BENCH_RATE: u32 = 1_000_000;
    /// `bench N K R`: a paced bench lasts N/R seconds, at most this.
    pub(super) const MAX_BENCH_SECS: u32 = 3600;
    /// Benches running at once.
    pub(super) const MAX_RUNNING_BENCHES: usize = 16;

    /// One of each scenario, as its example: the list that parsing, the help text and the
    /// card are generated from. A scenario missing here cannot be started.
    pub(super) fn catalogue() -> [Scenario; 8] {
        [
            Scenario::Echo("hello world".into()),
            Scenario::Artifact,
            Scenario::Approve,
            Scenario::Auth,
            Scenario::Fail,
            Scenario::Slow { n: 5 },
            Scenario::Idle { secs: 10 },
            Scenario::Bench {
                n: 1000,
                k: 256,
                rate: 0,
            },
        ]
    }

    /// The command word.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Scenario::Echo(_) => "echo",
            Scenario::Artifact => "artifact",
            Scenario::Approve => "approve",
            Scenario::Auth => "auth",
            Scenario::Fail => "fail",
            Scenario::Slow { .. } => "slow",
            Scenario::Idle { .. } => "idle",
            Scenario::Bench { .. } => "bench",
        }
    }

    /// The command with its arguments' names.
    pub(super) fn usage(&self) -> &'static str {
        match self {
            Scenario::Echo(_) => "echo <text>",
            Scenario::Slow { .. } => "slow <N>",
            Scenario::Idle { .. } => "idle <S>",
            Scenario::Bench { .. } => "bench <N> <K> [R]",
            Scenario::Artifact | Scenario::Approve | Scenario::Auth | Scenario::Fail => self.name(),
        }
    }

    /// What it does, with its caps.
    pub(super) fn about(&self) -> String {
        match self {
            Scenario::Echo(_) => "streams the text word by word".into(),
            Scenario::Artifact => "an artifact in chunks".into(),
            Scenario::Approve => "asks for your approval, then completes".into(),
            Scenario::Auth => "asks you to authenticate".into(),
            Scenario::Fail => "fails".into(),
            Scenario::Slow { .. } => format!("N ticks 100 ms apart, N ≤ {}", Self::MAX_SLOW_TICKS),
            Scenario::Idle { .. } => format!(
                "a quiet task that completes after S seconds, S ≤ {}",
                Self::MAX_IDLE_SECS
            ),
            Scenario::Bench { .. } => format!(
                "N events of K bytes, R per second or as fast as possible; N ≤ {}, \
                 {} ≤ K ≤ {}, N/R ≤ {} s",
                Self::MAX_BENCH_EVENTS,
                Self::BENCH_BYTES.start(),
                Self::BENCH_BYTES.end(),
                Self::MAX_BENCH_SECS
            ),
        }
    }

    /// The reply to a message that names no scenario.
    pub(super) fn help() -> String {
        let list: Vec<String> = Self::catalogue()
            .iter()
            .map(|s| format!("`{}` ({})", s.usage(), s.about()))
            .collect();
        format!(
            "I am the agui-a2a-gateway demo agent. Start your message with one of: {}.",
            list.join(", ")
        )
    }

    /// Every command's usage, joined by `sep` (the card's descriptions).
    pub(super) fn usages(sep: &str) -> String {
        let usages: Vec<&str> = Self::catalogue().iter().map(Scenario::usage).collect();
        usages.join(sep)
    }

    /// Every scenario's example message (the card's skill examples).
    pub(super) fn examples() -> Vec<String> {
        Self::catalogue().iter().map(Scenario::to_string).collect()
    }

    /// The scenario the user's message asks for: the first word (any case) names it,
    /// the following words are its arguments.
    pub(super) fn parse(text: &str) -> Result<Scenario, Refusal> {
        let mut words = text.split_whitespace();
        let command = words.next().unwrap_or_default().to_ascii_lowercase();
        let args: Vec<&str> = words.collect();
        let kind = Self::catalogue()
            .into_iter()
            .find(|s| s.name() == command)
            .ok_or(Refusal::Unknown)?;
        kind.with_args(&args).map_err(Refusal::Invalid)
    }

    /// This kind of scenario with `args` in place of its example's.
    fn with_args(self, args: &[&str]) -> Result<Scenario, String> {
        let usage = self.usage();
        let arg = |i: usize, name: &'static str| Arg {
            raw: args.get(i).copied(),
            usage,
            name,
        };
        Ok(match self {
            Scenario::Echo(_) => Scenario::Echo(args.join(" ")),
            Scenario::Artifact | Scenario::Approve | Scenario::Auth | Scenario::Fail => self,
            Scenario::Slow { .. } => Scenario::Slow {
                n: arg(0, "N").number(3, 0..=Self::MAX_SLOW_TICKS)?,
            },
            Scenario::Idle { .. } => Scenario::Idle {
                secs: arg(0, "S").number(10, 0..=Self::MAX_IDLE_SECS)?,
            },
            Scenario::Bench { .. } => {
                let n = arg(0, "N").number(1000, 0..=Self::MAX_BENCH_EVENTS)?;
                let k = arg(1, "K").number(64, Self::BENCH_BYTES)?;
                let rate = arg(2, "R").number(0, 0..=Self::MAX_BENCH_RATE)?;
                if rate > 0 && u64::from(n) > u64::from(rate) * u64::from(Self::MAX_BENCH_SECS) {
                    return Err(format!(
                        "`{usage}`: a paced bench lasts N/R seconds, at most {}; \
                         {n} events at {rate} per second take longer.",
                        Self::MAX_BENCH_SECS
                    ));
                }
                Scenario::Bench { n, k, rate }
            }
        })
    }

    /// Queue length of this scenario's streams: as many events as fit in
    /// [`STREAM_BUFFER_BYTES`], at least one.
    pub(super) fn buffer(&self) -> usize {
        match self {
            Scenario::Bench { k, .. } => (STREAM_BUFFER_BYTES / k).clamp(1, MAX_BUFFER_EVENTS),
            _ => MAX_BUFFER_EVENTS,
        }
    }

    /// The bench slot this scenario holds while it runs (none for the others); `Err` with
    /// the reason when every slot is taken.
    pub(super) fn slot(
        &self,
        benches: &Arc<Semaphore>,
    ) -> Result<Option<OwnedSemaphorePermit>, String> {
        if !matches!(self, Scenario::Bench { .. }) {
            return Ok(None);
        }
        benches.clone().try_acquire_owned().map(Some).map_err(|_| {
            format!(
                "The demo agent runs at most {} benches at once; try again when one ends.",
                Self::MAX_RUNNING_BENCHES
            )
        })
    }

    /// Plays the scenario on its task.
    async fn play(self, out: &Emitter) {
        match self {
            Scenario::Echo(text) => {
                for w in text.split_whitespace() {
                    out.emit(status(TaskState::Working, Some(format!("{w} "))))
                        .await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                out.emit(status(TaskState::Completed, Some(text))).await;
            }
            Scenario::Artifact => {
                let chunks = ["Hello ", "from ", "artifact."];
                for (i, c) in chunks.iter().enumerate() {
                    out.emit(Update::Artifact {
                        id: "artifact-1".into(),
                        name: "result.txt".into(),
                        text: (*c).into(),
                        append: i > 0,
                        last_chunk: i == chunks.len() - 1,
                    })
                    .await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                out.emit(status(TaskState::Completed, Some("Artifact ready.".into())))
                    .await;
            }
            Scenario::Approve => {
                let ask = "Do you approve? Reply yes or no.";
                out.emit(status(TaskState::InputRequired, Some(ask.into())))
                    .await
            }
            Scenario::Auth => {
                let ask = "Please authenticate, then reply.";
                out.emit(status(TaskState::AuthRequired, Some(ask.into())))
                    .await
            }
            Scenario::Fail => {
                out.emit(status(TaskState::Failed, Some("Simulated failure.".into())))
                    .await
            }
            Scenario::Slow { n } => {
                for i in 1..=n {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    out.emit(status(TaskState::Working, Some(format!("tick {i}/{n}"))))
                        .await;
                }
                out.emit(status(TaskState::Completed, Some(format!("slow {n} done"))))
                    .await;
            }
            Scenario::Idle { secs } => {
                // An open, quiet stream (the benchmark's memory-per-stream figure).
                tokio::time::sleep(Duration::from_secs(secs)).await;
                let done = format!("idle {secs} done");
                out.emit(status(TaskState::Completed, Some(done))).await;
            }
            Scenario::Bench { n, k, rate } => {
                let start = tokio::time::Instant::now();
                for i in 0..n {
                    if rate > 0 {
                        let due = Duration::from_secs_f64(f64::from(i) / f64::from(rate));
                        tokio::time::sleep_until(start + due).await;
                    }
                    // Each event carries its send time, for the benchmark's latency figures.
                    let mut text = String::with_capacity(k);
                    let _ = write!(text, "t={} i={i} ", stamp_nanos());
                    text.extend(std::iter::repeat_n('x', k.saturating_sub(text.len())));
                    out.emit(Update::Status {
                        state: TaskState::Working,
                        message: Some(AgentMessage::progress(text)),
                    })
                    .await;
                }
                let done = format!("bench {n} {k} done");
                out.emit(status(TaskState::Completed, Some(done))).await;
            }
        }
    }
}

/// The message that starts the scenario (the inverse of [`Scenario::parse`]).
impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        match self {
            Scenario::Echo(text) if !text.is_empty() => write!(f, " {text}"),
            Scenario::Slow { n } => write!(f, " {n}"),
            Scenario::Idle { secs } => write!(f, " {secs}"),
            Scenario::Bench { n, k, rate: 0 } => write!(f, " {n} {k}"),
            Scenario::Bench { n, k, rate } => write!(f, " {n} {k} {rate}"),
            _ => Ok(()),
        }
    }
}

/// One numeric argument of a scenario, for the one parser they share.
struct Arg<'a> {
    raw: Option<&'a str>,
    usage: &'static str,
    name: &'static str,
}

impl Arg<'_> {
    /// The argument as a whole number in `range`, or `default` when it is absent.
    fn number<T>(&self, default: T, range: RangeInclusive<T>) -> Result<T, String>
    where
        T: FromStr + PartialOrd + fmt::Display,
    {
        let Some(raw) = self.raw else {
            return Ok(default);
        };
        match raw.parse::<T>() {
            Ok(v) if range.contains(&v) => Ok(v),
            _ => Err(format!(
                "`{}`: {} must be a whole number from {} to {}, not {raw}.",
                self.usage,
                self.name,
                range.start(),
                range.end()
            )),
        }
    }
}

/// What a task does next.
#[derive(Debug)]
pub(super) enum Step {
    /// A new task plays its scenario.
    Start(Scenario),
    /// The answer to an interrupted task (`auth`: it was auth-required).
    Answer { auth: bool, text: String },
}

/// Publishes a task's updates: recorded on the task (and so broadcast to subscribers),
/// and sent with backpressure to the stream that started this turn (so a fast scenario
/// never outruns its reader).
pub(super) struct Emitter {
    pub(super) demo: Shared,
    pub(super) task_id: String,
    pub(super) origin: mpsc::Sender<Update>,
}

impl Emitter {
    async fn emit(&self, u: Update) {
        self.demo.tasks.record(&self.task_id, &u, |_| ());
        let _ = self.origin.send(u).await;
    }
}

fn status(state: TaskState, text: Option<String>) -> Update {
    Update::Status {
        state,
        message: text.map(AgentMessage::new),
    }
}

/// Runs one step of a task: working, then the scenario or the answer's completion. Holds
/// the task's bench slot, if any, until the step ends or is aborted.
pub(super) async fn play(out: Emitter, step: Step, _slot: Option<OwnedSemaphorePermit>) {
    out.emit(status(TaskState::Working, None)).await;
    match step {
        Step::Start(scenario) => scenario.play(&out).await,
        Step::Answer { auth, text } => {
            let reply = if auth {
                format!("Authenticated, thanks: {text}")
            } else {
                format!("Approved: {text}")
            };
            out.emit(status(TaskState::Completed, Some(reply))).await;
        }
    }
}

/// The origin stream of a turn ends here: terminal, or waiting for the client.
pub(super) fn is_final(state: &TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        match Scenario::parse(text) {
            Err(Refusal::Invalid(why)) => why,
            other => panic!("{text}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn every_scenario_parses_from_its_example() {
        for s in Scenario::catalogue() {
            assert_eq!(Scenario::parse(&s.to_string()), Ok(s.clone()), "{s}");
        }
    }

    #[test]
    fn parses_each_scenario_with_arguments_and_defaults() {
        let cases = [
            ("echo  a b   c", Scenario::Echo("a b c".into())),
            ("ECHO", Scenario::Echo(String::new())),
            ("artifact please", Scenario::Artifact),
            ("Approve", Scenario::Approve),
            ("auth", Scenario::Auth),
            ("fail", Scenario::Fail),
            ("slow", Scenario::Slow { n: 3 }),
            ("slow 100000", Scenario::Slow { n: 100_000 }),
            ("idle 5", Scenario::Idle { secs: 5 }),
            ("idle", Scenario::Idle { secs: 10 }),
            ("idle 3600", Scenario::Idle { secs: 3600 }),
            (
                "bench",
                Scenario::Bench {
                    n: 1000,
                    k: 64,
                    rate: 0,
                },
            ),
            (
                "bench 20000 100",
                Scenario::Bench {
                    n: 20_000,
                    k: 100,
                    rate: 0,
                },
            ),
            (
                "bench 20000 16384",
                Scenario::Bench {
                    n: 20_000,
                    k: 16_384,
                    rate: 0,
                },
            ),
            (
                "bench 20000 256",
                Scenario::Bench {
                    n: 20_000,
                    k: 256,
                    rate: 0,
                },
            ),
            (
                "bench 6000 256 2000",
                Scenario::Bench {
                    n: 6000,
                    k: 256,
                    rate: 2000,
                },
            ),
            (
                "bench 1000000 1048576",
                Scenario::Bench {
                    n: 1_000_000,
                    k: 1 << 20,
                    rate: 0,
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Scenario::parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn idle_is_a_scenario_not_the_help_text() {
        assert_eq!(Scenario::parse("idle 2"), Ok(Scenario::Idle { secs: 2 }));
    }

    #[test]
    fn anything_else_gets_the_help_text() {
        for text in ["", "what can you do?", "echoes", "benchmark 1 2"] {
            assert_eq!(Scenario::parse(text), Err(Refusal::Unknown), "{text}");
        }
        assert_eq!(Refusal::Unknown.text(), Scenario::help());
    }

    #[test]
    fn arguments_over_their_caps_are_refused_naming_the_cap() {
        assert!(refused("slow 100001").contains("from 0 to 100000"));
        assert!(refused("slow -1").contains("slow <N>"));
        assert!(refused("slow many").contains("not many"));
        assert!(refused("idle 3601").contains("from 0 to 3600"));
        assert!(refused("bench 1000001 64").contains("N must be a whole number from 0 to 1000000"));
        assert!(refused("bench 10 1048577").contains("K must be a whole number from 40 to 1048576"));
        assert!(refused("bench 10 39").contains("from 40"));
        assert!(refused("bench 10 64 1000001").contains("R must be"));
        assert!(refused("bench 1000000 64 10").contains("at most 3600"));
    }

    #[test]
    fn help_and_card_list_every_scenario() {
        let help = Scenario::help();
        let card = Scenario::usages(" | ");
        let examples = Scenario::examples();
        for s in Scenario::catalogue() {
            assert!(
                help.contains(&format!("`{}` (", s.usage())),
                "help lacks {s}"
            );
            assert!(card.contains(s.usage()), "card lacks {s}");
            assert!(examples.contains(&s.to_string()), "examples lack {s}");
        }
        let names: std::collections::HashSet<&str> =
            Scenario::catalogue().iter().map(Scenario::name).collect();
        assert_eq!(
            names.len(),
            Scenario::catalogue().len(),
            "one entry per command"
        );
    }

    #[test]
    fn bench_queues_fit_the_stream_budget() {
        let bench = |k| Scenario::Bench { n: 1, k, rate: 0 }.buffer();
        assert_eq!(bench(256), MAX_BUFFER_EVENTS);
        assert_eq!(bench(16_384), 64);
        assert_eq!(bench(1 << 20), 1);
        assert_eq!(Scenario::Echo("x".into()).buffer(), MAX_BUFFER_EVENTS);
    }

    #[test]
    fn benches_beyond_the_running_cap_are_refused() {
        let benches = Arc::new(Semaphore::new(1));
        let bench = Scenario::Bench {
            n: 1,
            k: 64,
            rate: 0,
        };
        let held = bench.slot(&benches).unwrap();
        assert!(held.is_some());
        assert!(bench.slot(&benches).unwrap_err().contains("at most"));
        assert!(Scenario::Fail.slot(&benches).unwrap().is_none());
        drop(held);
        assert!(bench.slot(&benches).unwrap().is_some());
    }
}
