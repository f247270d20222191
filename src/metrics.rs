//! Prometheus metrics (docs/design.md#10-observability), served at `GET /metrics` in the text
//! format, built on `prometheus-client` (the Prometheus project's Rust client).
//!
//! Invariants: the names are those of the design, spelled here and nowhere else; labels are
//! low-cardinality only — agent names (from config), outcomes, error codes (from
//! `crate::error`), A2A method names (from `crate::a2a`), `ok`/`error` — never thread, run,
//! task or context ids, nor anything a client or an upstream chose.

use std::sync::Arc;
use std::time::Duration;

use crate::store::{FailureKind, StoreErrors};

pub(crate) mod inbox;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    agent: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    agent: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    agent: String,
    method: &'static str,
    binding: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    agent: String,
    kind: &'static str,
}

/// What a token count counts (`kind` label of `agui_gateway_tokens_total`): a closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// Prompt tokens (cached ones included).
    Input,
    /// Generated tokens (reasoning included).
    Output,
    /// The output tokens spent on reasoning.
    Reasoning,
    /// The input tokens read from a cache.
    Cached,
}

impl TokenKind {
    const ALL: [TokenKind; 4] = [Self::Input, Self::Output, Self::Reasoning, Self::Cached];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Output => "output",
            Self::Reasoning => "reasoning",
            Self::Cached => "cached",
        }
    }
}

/// How a run ended (`outcome` label of `agui_gateway_runs_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    Success,
    Interrupt,
    Cancelled,
    Error,
}

impl RunOutcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Interrupt => "interrupt",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
        }
    }
}

type SecondsHistogram = Family<AgentLabels, Histogram, fn() -> Histogram>;

/// Seconds from 5 ms to about 20 minutes.
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.5, 14))
}

/// The gateway's metrics; cheap to share (`Arc`).
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    runs: Family<RunLabels, Counter>,
    run_errors: Family<ErrorLabels, Counter>,
    open_streams: Family<AgentLabels, Gauge>,
    upstream_requests: Family<UpstreamLabels, Counter>,
    time_to_first_event: SecondsHistogram,
    run_duration: SecondsHistogram,
    events: Family<AgentLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
    rate_limited: Counter,
    /// The live inbox's (docs/design.md#the-live-inbox).
    pub(crate) inbox: inbox::InboxMetrics,
}

/// `agui_gateway_binding_store_errors_total{kind}`, read from the store's own counts at
/// scrape; every kind's series exists from the start.
#[derive(Debug)]
struct StoreErrorsCollector(Arc<StoreErrors>);

impl Collector for StoreErrorsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut metric = encoder.encode_descriptor(
            "agui_gateway_binding_store_errors",
            "Failed or skipped binding store operations, by kind.",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for kind in FailureKind::ALL {
            let counter = ConstCounter::new(self.0.of(kind));
            counter.encode(metric.encode_family(&[("kind", kind.as_str())])?)?;
        }
        Ok(())
    }
}

/// `metric`, registered in `registry` under `name` with its `help`.
fn registered<M: prometheus_client::registry::Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// Every metric of docs/design.md#10-observability, registered; `store_errors` is the
    /// binding store's count.
    pub(crate) fn new(store_errors: Arc<StoreErrors>) -> Self {
        let mut registry = Registry::default();
        let runs = registered(
            &mut registry,
            "agui_gateway_runs",
            "Runs ended, by agent and outcome.",
            Family::default(),
        );
        let run_errors = registered(
            &mut registry,
            "agui_gateway_run_errors",
            "Runs ended with RUN_ERROR, by agent and code.",
            Family::default(),
        );
        let open_streams = registered(
            &mut registry,
            "agui_gateway_open_streams",
            "Run streams open now.",
            Family::default(),
        );
        let upstream_requests = registered(
            &mut registry,
            "agui_gateway_upstream_requests",
            "A2A calls, by agent, A2A method, binding and result.",
            Family::default(),
        );
        let time_to_first_event: SecondsHistogram = registered(
            &mut registry,
            "agui_gateway_time_to_first_event_seconds",
            "From the run's start to the upstream's first event.",
            Family::new_with_constructor(seconds_histogram),
        );
        let run_duration: SecondsHistogram = registered(
            &mut registry,
            "agui_gateway_run_duration_seconds",
            "From the run's start to its terminal event.",
            Family::new_with_constructor(seconds_histogram),
        );
        let events = registered(
            &mut registry,
            "agui_gateway_events",
            "AG-UI events sent to clients.",
            Family::default(),
        );
        let tokens = registered(
            &mut registry,
            "agui_gateway_tokens",
            "Tokens the agents reported using, by agent and kind (input, output, reasoning, cached).",
            Family::default(),
        );
        let rate_limited = registered(
            &mut registry,
            "agui_gateway_rate_limited",
            "Run requests refused by rate_limits (429).",
            Counter::default(),
        );
        registry.register_collector(Box::new(StoreErrorsCollector(store_errors)));
        let inbox = inbox::InboxMetrics::register(&mut registry);
        Self {
            registry,
            runs,
            run_errors,
            open_streams,
            upstream_requests,
            time_to_first_event,
            run_duration,
            events,
            tokens,
            rate_limited,
            inbox,
        }
    }

    /// Starts every agent's series at zero (runs per outcome, open streams, events), so a
    /// quiet agent still shows: absent series read as "no data", not as zero.
    pub(crate) fn know_agents<'a>(&self, agents: impl IntoIterator<Item = &'a str>) {
        for agent in agents {
            for outcome in [
                RunOutcome::Success,
                RunOutcome::Interrupt,
                RunOutcome::Cancelled,
                RunOutcome::Error,
            ] {
                let _ = self.runs.get_or_create(&RunLabels {
                    agent: agent.to_owned(),
                    outcome: outcome.as_str(),
                });
            }
            let _ = self.open_streams.get_or_create(&Self::agent(agent));
            let _ = self.events.get_or_create(&Self::agent(agent));
            for kind in TokenKind::ALL {
                let _ = self.tokens.get_or_create(&TokenLabels {
                    agent: agent.to_owned(),
                    kind: kind.as_str(),
                });
            }
        }
    }

    /// The text exposition (`text/plain; version=0.0.4` compatible, OpenMetrics encoder).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    fn agent(agent: &str) -> AgentLabels {
        AgentLabels {
            agent: agent.to_owned(),
        }
    }

    /// A run stream opened; the returned guard counts it until dropped.
    pub(crate) fn stream_opened(self: &Arc<Self>, agent: &str) -> OpenStream {
        self.open_streams.get_or_create(&Self::agent(agent)).inc();
        OpenStream {
            metrics: self.clone(),
            agent: agent.to_owned(),
        }
    }

    /// A run ended: its outcome, its error code if any, its duration.
    pub(crate) fn run_ended(
        &self,
        agent: &str,
        outcome: RunOutcome,
        error_code: Option<&str>,
        took: Duration,
    ) {
        self.runs
            .get_or_create(&RunLabels {
                agent: agent.to_owned(),
                outcome: outcome.as_str(),
            })
            .inc();
        if let Some(code) = error_code {
            self.run_errors
                .get_or_create(&ErrorLabels {
                    agent: agent.to_owned(),
                    code: bounded_code(code).to_owned(),
                })
                .inc();
        }
        self.run_duration
            .get_or_create(&Self::agent(agent))
            .observe(took.as_secs_f64());
    }

    /// The upstream's first event of a run came `after` its start.
    pub(crate) fn first_event(&self, agent: &str, after: Duration) {
        self.time_to_first_event
            .get_or_create(&Self::agent(agent))
            .observe(after.as_secs_f64());
    }

    /// `n` AG-UI events went to a client.
    pub(crate) fn events_sent(&self, agent: &str, n: usize) {
        self.events
            .get_or_create(&Self::agent(agent))
            .inc_by(n as u64);
    }

    /// One A2A call ended: `method` the A2A method name, `binding` the binding that carried
    /// it (labelled as cards spell it: `JSONRPC`, `HTTP+JSON`, `GRPC`).
    pub(crate) fn upstream_call(
        &self,
        agent: &str,
        method: &'static str,
        binding: crate::a2a::card::Binding,
        ok: bool,
    ) {
        self.upstream_requests
            .get_or_create(&UpstreamLabels {
                agent: agent.to_owned(),
                method,
                binding: binding.as_str(),
                result: if ok { "ok" } else { "error" },
            })
            .inc();
    }

    /// A run's agent reported using `n` tokens of `kind`.
    pub(crate) fn tokens_used(&self, agent: &str, kind: TokenKind, n: u64) {
        self.tokens
            .get_or_create(&TokenLabels {
                agent: agent.to_owned(),
                kind: kind.as_str(),
            })
            .inc_by(n);
    }

    /// A run request was refused by `rate_limits`.
    pub(crate) fn rate_limited(&self) {
        self.rate_limited.inc();
    }
}

/// A `RUN_ERROR` code as a label value: `a2a_error_<n>` carries a number the upstream chose,
/// so only the JSON-RPC reserved range keeps its own series; any other number is
/// `a2a_error_other` (an upstream cannot grow the label set without bound).
fn bounded_code(code: &str) -> &str {
    match code
        .strip_prefix(crate::error::RPC_CODE_PREFIX)
        .map(str::parse::<i64>)
    {
        Some(Ok(n)) if crate::a2a::rpc_code::RESERVED.contains(&n) => code,
        Some(_) => "a2a_error_other",
        None => code,
    }
}

/// Counts an open run stream in `agui_gateway_open_streams` until dropped.
#[derive(Debug)]
pub(crate) struct OpenStream {
    metrics: Arc<Metrics>,
    agent: String,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.metrics
            .open_streams
            .get_or_create(&Metrics::agent(&self.agent))
            .dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_carries_the_designs_names() {
        let errors = Arc::new(StoreErrors::default());
        errors.add(FailureKind::Auth);
        errors.add(FailureKind::Auth);
        let m = Arc::new(Metrics::new(errors));
        let stream = m.stream_opened("ref");
        m.run_ended(
            "ref",
            RunOutcome::Error,
            Some("a2a_task_failed"),
            Duration::from_millis(30),
        );
        m.upstream_call(
            "ref",
            "SendStreamingMessage",
            crate::a2a::card::Binding::HttpJson,
            true,
        );
        m.first_event("ref", Duration::from_millis(3));
        m.events_sent("ref", 5);
        m.tokens_used("ref", TokenKind::Reasoning, 20);
        m.rate_limited();
        let text = m.encode();
        for line in [
            r#"agui_gateway_runs_total{agent="ref",outcome="error"} 1"#,
            r#"agui_gateway_run_errors_total{agent="ref",code="a2a_task_failed"} 1"#,
            r#"agui_gateway_open_streams{agent="ref"} 1"#,
            r#"agui_gateway_upstream_requests_total{agent="ref",method="SendStreamingMessage",binding="HTTP+JSON",result="ok"} 1"#,
            r#"agui_gateway_time_to_first_event_seconds_count{agent="ref"} 1"#,
            r#"agui_gateway_run_duration_seconds_count{agent="ref"} 1"#,
            r#"agui_gateway_events_total{agent="ref"} 5"#,
            r#"agui_gateway_tokens_total{agent="ref",kind="reasoning"} 20"#,
            "agui_gateway_rate_limited_total 1",
            r#"agui_gateway_binding_store_errors_total{kind="auth"} 2"#,
            r#"agui_gateway_binding_store_errors_total{kind="cluster"} 0"#,
        ] {
            assert!(text.contains(line), "{line} missing in:\n{text}");
        }
        m.run_ended(
            "ref",
            RunOutcome::Error,
            Some("a2a_error_123456"),
            Duration::ZERO,
        );
        assert!(m
            .encode()
            .contains(r#"agui_gateway_run_errors_total{agent="ref",code="a2a_error_other"} 1"#));
        drop(stream);
        assert!(m
            .encode()
            .contains(r#"agui_gateway_open_streams{agent="ref"} 0"#));
    }
}
